"""`session.terminate`: end the voice conversation through the dialogue-session boundary."""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Mapping

from ..events.definition import EventDefinition, EventFailure, ExecutionContext, Resolution, ResolveContext
from ..events.model import ResultPolicy, Risk
from ..ports.device import SessionControl
from .claims import claims_farewell
from .intent import asks_to_leave
from .text import collapse_spaces

NAME = "session.terminate"
TOOL_NAME = "terminate_session"
MAX_REASON = 200

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {
            "type": "string",
            "maxLength": MAX_REASON,
            "description": "Optional short reason, e.g. 'user said goodbye'.",
        },
    },
    "additionalProperties": False,
}


def resolve(proposed: Mapping[str, Any] | None, ctx: ResolveContext) -> Resolution:
    """Always complete: keep a trimmed `reason` when one was proposed, ignore anything else."""
    reason = (proposed or {}).get("reason")
    if reason is None or isinstance(reason, (dict, list)):
        return Resolution(arguments={})
    text = collapse_spaces(str(reason))[:MAX_REASON]
    return Resolution(arguments={"reason": text} if text else {})


_FAREWELL = re.compile(
    # courtesies before it ("Thanks Pip, goodbye!", "好的，谢谢你，再见！": both unmarked by the real 1.5B model)
    r"^(?:(?:ok(?:ay)?|well|alright|thanks|thank\s+you|pip|好的|好|谢谢你?|嗯)[\s,!.，！。]*){0,4}"
    r"(?:say\s+|说声?|跟你说)?"  # "say goodnight" (the clause of "turn it down and say goodnight"), "说再见"
    r"(?:good\s*-?\s*bye|bye(?:[\s-]+bye)?|see\s+you(?:\s+later|\s+tomorrow)?|good\s*night|i'?m\s+done"
    r"|that'?s\s+all|stop\s+talking|talk\s+to\s+you\s+later"
    r"|再见|拜拜|晚安|不聊了|我走了|先这样|下次再聊)"
    r"(?:[\s,!.。！~]*(?:now|for\s+now|pip|toy|啦|了|吧|哦)?)*[\s,!.。！~]*$",
    re.IGNORECASE)


def gate_match(ctx: ResolveContext) -> bool:
    """True when the whole utterance is a plain farewell ("goodbye", "bye bye", "say goodnight", "再见"), safe to act
    on offline."""
    return bool(_FAREWELL.match(unicodedata.normalize("NFKC", ctx.utterance or "").strip()))


def supports(arguments: Mapping[str, Any], ctx: ResolveContext) -> bool:
    """The model may end the session only when the child said goodbye or asked to stop (en and zh)."""
    return asks_to_leave(ctx.utterance)


def gate_reply(arguments: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """The farewell the offline gate speaks before ending the session."""
    return "拜拜，下次再聊！" if result.get("locale") == "zh" else "Bye bye! Talk to you soon."


def failure_line(arguments: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """Spoken when ending the session failed, so the toy does not pretend it left."""
    return "抱歉，我现在没能结束聊天。" if info.get("locale") == "zh" else "Sorry, I couldn't end our chat just now."


def definition(session: SessionControl) -> EventDefinition:
    """The plugin definition bound to a SessionControl port."""

    async def handle(arguments: Mapping[str, Any], ctx: ExecutionContext) -> Mapping[str, Any]:
        result = dict(await session.end_session(arguments.get("reason"), ctx.event_id))
        if result.get("terminated") is False:
            raise EventFailure("not_terminated", "the session boundary refused to end the session", result)
        return {"terminated": True, **result}

    return EventDefinition(
        name=NAME,
        version=1,
        tool_name=TOOL_NAME,
        description="End the voice conversation when the user clearly wants to stop or says goodbye.",
        schema=SCHEMA,
        resolver=resolve,
        handler=handle,
        result_policy=ResultPolicy.TERMINATE,
        llm_fallback=False,
        risk=Risk.HIGH,
        idempotent=True,
        concurrency_class="session.lifecycle",
        timeout_s=3.0,
        terminal=True,
        failure_template=failure_line,
        gate_match=gate_match,
        gate_reply=gate_reply,
        supports=supports,
        claims=claims_farewell,
        tags=frozenset({"builtin", "session"}),
    )
