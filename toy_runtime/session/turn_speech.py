"""How a turn says a sentence: the same speakable guard and clause cutting for template lines as for model text.

Model text (replies, follow-ups) and holding cues arrive already cut by the streaming splitter, or short, and are said
as they come. Every other line (a continuation, a correction, the gate's confirmations) is cut here, so speech can
start with its first clause, and anything unspeakable in it is hidden and audited.
"""

from __future__ import annotations

from typing import Callable

from ..agent.speakable import SpeakableRules, speakable
from ..audit import AuditKind, AuditSink
from .items import Answer, Speech, SpeechKind

__all__ = ["turn_speech"]

# kinds already cut by the streaming splitter (or short): said as they come, not cut again
_CUT_ALREADY = frozenset({SpeechKind.REPLY, SpeechKind.FOLLOW_UP, SpeechKind.HOLDING})


def turn_speech(emit: Callable[[Speech], None], spoken: list[Speech], *, rules: SpeakableRules, audit: AuditSink,
                turn_id: str, first_clause_min_chars: int) -> Callable[[Speech], None]:
    """The `say` of one turn: emits each speakable piece and appends it to `spoken`."""
    def say(speech: Speech) -> None:
        if speech.kind in _CUT_ALREADY:
            spoken.append(speech)
            emit(speech)
            return
        # an early first clause only for answer 1, where it decides how soon the child hears anything
        early = first_clause_min_chars if speech.answer == Answer.FIRST else 0
        parts, hidden = speakable(speech.text, rules, first_clause_min_chars=early, first_clause_min_chars_cjk=early)
        if hidden:
            audit.record(AuditKind.SPEECH_HIDDEN, turn_id=turn_id, speech_kind=speech.kind,
                         hidden=[h.kind for h in hidden])
        for part in parts:
            piece = Speech(speech.answer, part, sources=speech.sources, kind=speech.kind, at=speech.at)
            spoken.append(piece)
            emit(piece)

    return say
