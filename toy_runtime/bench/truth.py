"""What a child would hold against the toy after a turn (issue 27), measured from what was spoken and what ran:

- a promise left standing: the model's answer claims an action ("Okay, I've lowered the volume.", "Bye!") that no
  event of the turn backs and no spoken correction takes back;
- an unasked disruptive event: one whose definition asks for the child's words (`supports`: end the session, mute)
  that succeeded although the dataset's labels do not expect it;
- the child's language: a Chinese question answered mostly in Chinese.

The labels and the spoken text decide, not the runtime's own audit, so a runtime that forgot to audit still counts.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from ..events import EventRegistry, EventResult, not_run_lines
from ..language import guess_locale
from ..session.items import Speech
from ..session.promises import backed, claimed

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def spoken_language(text: str) -> str | None:
    """'zh' when Han characters are at least as many as Latin words, 'en' otherwise; None for nothing spoken.

    A Chinese answer that names "Pip" is still Chinese; an English one with a stray 你好 is still English."""
    han, words = len(_HAN.findall(text)), len(_LATIN_WORD.findall(text))
    if not han and not words:
        return None
    return "zh" if han >= words else "en"


def promises_left(speeches: Sequence[Speech], results: Iterable[EventResult], registry: EventRegistry) -> list[str]:
    """Names the model's answer claimed with no event behind them and no correction spoken after."""
    open_claims = unbacked_claims(speeches, results, registry)
    others = " ".join(s.text for s in speeches if s.kind != "reply")
    return [name for name in open_claims
            if not any(line and line in others for locale in ("en", "zh")
                       for line in not_run_lines([name], registry.lookup, locale))]


def unbacked_claims(speeches: Sequence[Speech], results: Iterable[EventResult], registry: EventRegistry) -> list[str]:
    """Names the model's answer claimed with no event behind them (corrected or not): what the model did."""
    results = list(results)
    return [name for name in claimed(speeches, registry) if name not in backed(results)]


def unasked_disruptive(results: Iterable[EventResult], expected: Iterable[str],
                       registry: EventRegistry) -> list[str]:
    """Succeeded events that need the child's words (`supports`) and were not expected by the labels."""
    wanted = list(expected)
    out = []
    for result in results:
        definition = registry.lookup(result.name)
        if definition is None or definition.supports is None or not result.ok:
            continue
        if result.name in wanted:
            wanted.remove(result.name)
            continue
        out.append(result.name)
    return out


def turn_truth(user: str, speeches: Sequence[Speech], results: Sequence[EventResult], expected_all: Sequence[str],
               registry: EventRegistry) -> dict[str, Any]:
    """The per-turn record fields (see the module doc)."""
    answer = " ".join(s.text for s in speeches if s.kind not in ("holding",))
    return {
        "user_language": guess_locale(user),
        "answer_language": spoken_language(answer),
        "unbacked_claims": unbacked_claims(speeches, results, registry),
        "promises_left": promises_left(speeches, results, registry),
        "unasked_disruptive": unasked_disruptive(results, expected_all, registry),
        "holding_cue": any(s.kind == "holding" for s in speeches),  # the child waited long enough to hear one
    }


def group_truth(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts over a group's completed turns."""
    zh = [r for r in rows if r.get("user_language") == "zh"]
    return {
        "turns_with_unbacked_claim": sum(1 for r in rows if r.get("unbacked_claims")),
        "promises_left": sum(len(r.get("promises_left") or ()) for r in rows),
        "unasked_disruptive_succeeded": sum(len(r.get("unasked_disruptive") or ()) for r in rows),
        "turns_with_holding_cue": sum(1 for r in rows if r.get("holding_cue")),
        "zh_turns": len(zh),
        "zh_answered_in_zh": sum(1 for r in zh if r.get("answer_language") == "zh"),
        "en_turns_answered_in_zh": sum(1 for r in rows if r.get("user_language") == "en"
                                       and r.get("answer_language") == "zh"),
    }
