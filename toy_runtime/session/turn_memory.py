"""What the conversation keeps of a turn: the child's words and what the toy said out loud, with the mode's record of
the turn's events — never their results.

Event results (search snippets above all) are untrusted outside text, and the history feeds later prompts, EventAgent's
among them. One assistant message per turn also keeps the roles alternating, which some local chat templates require.
"""

from __future__ import annotations

from typing import Sequence

from ..agent.chat_agent import ChatAgent
from ..agent.tool_calls import HistoryCall
from ..events import EventResult
from ..events.definition import NOT_ASKED
from .conversation import Conversation
from .items import Speech, SpeechKind
from .turn_state import Turn

__all__ = ["remember_interrupted", "remember_turn"]


def remember_turn(conversation: Conversation, chat: ChatAgent | None, turn: Turn,
                  results: Sequence[EventResult]) -> None:
    """What the child said and, as one message, everything the toy said, with the mode's record of the turn's events."""
    conversation.add("user", turn.text, turn_id=turn.turn_id)
    # the turn's events stay in ChatAgent's history in the mode's own form (a block, or calls with a status), so a
    # small model keeps seeing the form it is asked to write (results are never kept)
    # a request refused as not asked is left out: a small model shown its own unasked goodbye would repeat it
    results = [r for r in results if r.error_code != NOT_ASKED]
    block = chat.history_block([r.name for r in results]) if chat is not None else ""
    calls = chat.history_calls(results, turn.turn_id) if chat is not None else []
    conversation.add("assistant", " ".join(s.text for s in turn.spoken if s.kind != SpeechKind.HOLDING),
                     protocol=block, calls=calls, turn_id=turn.turn_id)


def remember_interrupted(conversation: Conversation, text: str, heard: Sequence[Speech], *,
                         protocol: str = "", calls: Sequence[HistoryCall] = ()) -> None:
    """A turn the child cut off (barge-in): its words and only what the toy had said out loud by then enter the
    history, so the next answer neither repeats the unheard rest nor builds on it as if it had been said. A turn
    whose model had finished (it was remembered whole while its audio still played) is cut back to the same.
    `protocol` / `calls`: the mode's record (a block, or calls with the status "started") of the events the turn had
    already started — they stand, so the turn enters with them even if nothing of it was heard. Nothing heard and
    no record: nothing enters (the roles keep alternating)."""
    said = " ".join(s.text for s in heard if s.kind != SpeechKind.HOLDING)
    if conversation.cut_reply(conversation.current_turn_id, said) or not (said or protocol or calls):
        return
    conversation.add("user", text)
    conversation.add("assistant", said, protocol=protocol, calls=calls)
