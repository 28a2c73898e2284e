"""`bench voice --session pauses`: the pause corpus spoken into the real `run`, heard from outside.

The pause corpus (pause_corpus.py) judges the end of turn offline. Here its utterances of one language are played
into the virtual mic as a child would say them — the paused ones with their pauses of a quiet room, the complete
commands as they are — and the toy is judged by what a child would hear:

- *cut*: the runtime ended its turn before the child had finished: its end of speech came in a pause, it ended
  more than one turn on the utterance, or the toy's speaker sounded before the child was done (an answer inside a
  pause, or over the words that came after it);
- *heard voice to voice*: from the child's last sound to the toy's first (as `bench voice`);
- *cut, then answered whole*: the cut ones whose last turn was not interrupted and holds the utterance's words
  (`covers`): the toy stopped when she went on, and answered her whole sentence (session/going_on.py);
- *heard as cut*: what the child meets — the toy sounded before she was done (`sounded_early`), or a cut left her
  with an answer to part of what she said. A turn stopped while the toy still thought, and answered whole, is not;
- *heard voice to voice*: over the ones not heard as cut.

Per class (paused / complete), so what the prediction buys the complete commands and what it costs the paused
ones are side by side, on the same clock as the rest of `bench voice`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..language import has_cjk
from ..metrics.turns import percentile
from .heard import HeardTurn, Levels

__all__ = ["PausePlay", "pause_plays", "was_cut", "sounded_early", "covers", "answered_whole", "class_summary"]

CUT_MARGIN_S = 0.05  # the toy sounding this soon after the child's last sound is still inside her utterance
# The runtime's end of speech this long before the child's last sound: it ended in a pause (every last part of
# the corpus is longer; a missed quiet last word is tens of ms)
CUT_EARLY_MS = 250.0
# A transcript that holds this share of an utterance's words has all of it: the recognizer drops fillers ("um",
# "嗯") and writes numbers as digits
COVER_SHARE = 0.75
_WORD = re.compile(r"[a-z']+|[0-9]+")


@dataclass(frozen=True)
class PausePlay:
    """One utterance of the session: its audio (16 kHz int16), its class, and where its last part starts."""

    text: str
    kind: str  # "paused" or "complete"
    pcm: bytes
    last_start_s: float  # 0 for a complete command


def pause_plays(language: str, cache_dir: Path, *, whole_sentences: bool = False) -> list[PausePlay]:
    """The corpus's utterances in `language` ("en"/"zh"): two paused ones, then a complete command, in turn."""
    from .pause_corpus import COMPLETE, PAUSED, join_parts, pauses_for
    from .utterances import audible_phrase
    from .whole_sentences import whole_sentence_parts

    paused, complete = [], []
    for index, parts_text in enumerate(PAUSED):
        if has_cjk(parts_text[0]) != (language == "zh"):
            continue
        parts = (whole_sentence_parts(parts_text, cache_dir) if whole_sentences
                 else [audible_phrase(t, cache_dir) for t in parts_text])
        audio, last_start = join_parts(parts, pauses_for(index, len(parts)), seed=index)
        paused.append(PausePlay(" … ".join(parts_text), "paused", audio.tobytes(), last_start / 16000))
    for text in COMPLETE:
        if has_cjk(text) == (language == "zh"):
            complete.append(PausePlay(text, "complete", audible_phrase(text, cache_dir).tobytes(), 0.0))
    plays: list[PausePlay] = []
    while paused or complete:
        plays += paused[:2] + complete[:1]
        del paused[:2], complete[:1]
    return plays


def was_cut(heard: HeardTurn, speaker: Levels, start_s: float, threshold_db: float, *, turns_ended: int,
            runtime_early_ms: float | None) -> bool:
    """Whether the child was cut off: the runtime ended more than one turn on this utterance; or its own end of
    speech came more than `CUT_EARLY_MS` before the child's last sound (`runtime_early_ms`: its logged voice to
    voice less the heard one), so it ended the turn in a pause; or the toy's speaker sounded between the start of
    the child's speech and `CUT_MARGIN_S` after its end."""
    if turns_ended > 1 or (runtime_early_ms is not None and runtime_early_ms > CUT_EARLY_MS):
        return True
    return sounded_early(heard, speaker, start_s, threshold_db)


def sounded_early(heard: HeardTurn, speaker: Levels, start_s: float, threshold_db: float) -> bool:
    """Whether the toy's speaker sounded between the start of the child's speech (from `start_s` on) and
    `CUT_MARGIN_S` after its end: she heard it before she was done."""
    if heard.speech_start_s is None or heard.speech_end_s is None:
        return False
    lo = speaker.index_at(max(start_s, heard.speech_start_s))
    hi = min(speaker.index_at(heard.speech_end_s + CUT_MARGIN_S), len(speaker.db))
    return bool(np.any(speaker.db[lo:hi] > threshold_db))


def covers(reference: str, transcript: str, *, share: float = COVER_SHARE) -> bool:
    """Whether `transcript` holds at least `share` of `reference`'s words (Chinese: its characters), in order."""
    from difflib import SequenceMatcher

    def units(text: str) -> list[str]:
        text = text.lower()
        return [c for c in text if has_cjk(c)] if has_cjk(text) else _WORD.findall(text)

    said, heard = units(reference), units(transcript)
    matched = sum(block.size for block in SequenceMatcher(None, said, heard, autojunk=False).get_matching_blocks())
    return bool(said) and matched >= share * len(said)


def answered_whole(play: PausePlay, last_turn_text: str | None, *, interrupted: bool) -> bool:
    """Whether the last turn the runtime ended on `play` (its transcript, None: no turn) answered all of it: not
    interrupted, holding the utterance's words and those of its first part, which is what a cut loses."""
    parts = play.text.split(" … ")
    return (last_turn_text is not None and not interrupted and covers(" ".join(parts), last_turn_text)
            and covers(parts[0], last_turn_text))


def class_summary(plays: Sequence[PausePlay], cuts: Sequence[bool], heard_ms: Sequence[float | None],
                  whole: Sequence[bool] = (), sounded: Sequence[bool] = ()) -> dict[str, Any]:
    """Per class: utterances, cuts, the cut ones answered whole in the end (`whole`: per utterance), the ones heard
    as cut (`sounded`: the toy sounded before she was done, per utterance; or cut and not answered whole), and heard
    voice to voice (p50 / p90 ms) over the ones not heard as cut. Without `whole` and `sounded`, every cut is heard."""
    out: dict[str, Any] = {}
    whole = list(whole) or [False] * len(plays)
    sounded = list(sounded) or [False] * len(plays)
    felt = [s or (c and not w) for c, w, s in zip(cuts, whole, sounded)]
    for kind in ("paused", "complete"):
        rows = [(c, w, f, h) for p, c, w, f, h in zip(plays, cuts, whole, felt, heard_ms) if p.kind == kind]
        heard = [h for _, _, f, h in rows if not f and h is not None]
        p50, p90 = percentile(heard, 50), percentile(heard, 90)
        out[kind] = {"utterances": len(rows), "cut": sum(c for c, _, _, _ in rows),
                     "cut_answered_whole": sum(c and w for c, w, _, _ in rows),
                     "heard_as_cut": sum(f for _, _, f, _ in rows),
                     "heard_p50_ms": None if p50 is None else round(p50, 1),
                     "heard_p90_ms": None if p90 is None else round(p90, 1)}
    return out
