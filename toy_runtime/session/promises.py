"""Promises without their action (issue 27): a sentence of the model's answer that claims an action ("Okay, I've
lowered the volume to ten.", "Bye!", "I'll remind you…") while no such event ran in the turn.

Each definition says, through its `claims` hook, which sentences claim it; this module never names an event. A claim
left without its event is audited (`chat.unbacked_promise`) and corrected with the definition's own not-run line,
so nothing false is left standing.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from ..audit import AuditKind, AuditSink
from ..events import EventRegistry, EventResult, not_run_lines
from ..events.definition import NOT_ASKED
from .items import Speech

# sentence ends inside one spoken piece ("Bye bye! Talk to you soon."): a claim is read one sentence at a time
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


def claimed(spoken: Sequence[Speech], registry: EventRegistry) -> dict[str, str]:
    """Definition name → the first sentence of the model's own answer that claims it."""
    found: dict[str, str] = {}
    hooks = [(d.name, d.claims) for d in registry if d.claims is not None]
    for speech in spoken:
        if speech.kind != "reply":  # only the model's words: gate lines and templates are written to be true
            continue
        for sentence in filter(None, (s.strip() for s in _SENTENCE_END.split(speech.text))):
            for name, claims in hooks:
                if name not in found and claims(sentence):
                    found[name] = sentence
    return found


def backed(results: Iterable[EventResult]) -> set[str]:
    """Names whose claim is answered by the turn: the event ran, or its failure got its own correction line.
    A request refused as not asked (`NOT_ASKED`) said nothing, so it backs nothing."""
    return {r.name for r in results if r.error_code != NOT_ASKED}


class PromiseCheck:
    """Finds, audits and corrects the model's claims that no event of the turn backs."""

    def __init__(self, registry: EventRegistry, audit: AuditSink) -> None:
        self.registry = registry
        self.audit = audit

    def unbacked(self, spoken: Sequence[Speech], results: Iterable[EventResult], turn_id: str,
                 also_backed: Iterable[str] = ()) -> list[str]:
        """The claimed names with no event behind them, each audited with the sentence that claimed it."""
        claims = claimed(spoken, self.registry)
        covered = backed(results) | set(also_backed)
        names = [name for name in claims if name not in covered]
        for name in names:
            self.audit.record(AuditKind.CHAT_UNBACKED_PROMISE, turn_id=turn_id, name=name, sentence=claims[name])
        return names

    def corrections(self, names: Sequence[str], locale: str) -> tuple[str, ...]:
        """The definitions' own truthful not-run lines for these names ("Sorry, I couldn't add that reminder.")."""
        return not_run_lines(names, self.registry.lookup, locale) if names else ()
