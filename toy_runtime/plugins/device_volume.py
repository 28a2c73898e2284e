"""`device.volume.adjust`: set, raise, lower, mute or unmute the speaker through the Mixer port.

Arguments: `mode` absolute|relative|mute|unmute; `value` 0..100 only for absolute; `delta` -100..100 (not 0) only
for relative. "Set to 30" is absolute 30, "up by 30" is relative +30. A request without a number ("a bit louder",
"声音大一点", "quieter") is relative by the configured step (DEFAULT_STEP = 10 percentage points).
Changing the level of a muted speaker also unmutes it: asking for "louder" and hearing nothing would be a failure.

The child's words outrank the model (design §3.2; the same rule in both invocation modes and for EventAgent answers):
a level, direction, step size or mute the child said wins over proposed arguments, and proposed arguments only fill
what the words leave open ("change it by 20" + a proposed +20 → +20; "change the volume" + a proposed 30 → 30;
"set the volume to 30" + a proposed 80 → 30; "louder" + a proposed -20 → +step).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any, Mapping

from ..events.definition import EventDefinition, EventFailure, ExecutionContext, Resolution, ResolveContext
from ..events.model import ResultPolicy, Risk
from ..ports.device import Mixer, MixerError
from ..signals import SignalBus, VolumeSignal
from .numbers import normalize
from ..language import has_cjk
from .text import wants_chinese
from .claims import claims_volume
from .intent import asks_about_sound, asks_for_quiet
from .volume_words import BadNumber, Said, hear, merge, read_proposal

NAME = "device.volume.adjust"
TOOL_NAME = "adjust_device_volume"
DEFAULT_STEP = 10  # percentage points for "a bit louder" / "声音大一点"
MODES = ("absolute", "relative", "mute", "unmute")

QUESTION_EN = "How loud should I be? Say a number from 0 to 100, or louder/quieter."
QUESTION_ZH = "要多大声呢？说一个0到100的数字，或者说大声点、小声点。"
DIRECTION_EN = "Should I make it louder or quieter?"
DIRECTION_ZH = "要调大还是调小？"
FAILURE_EN = "Sorry, I couldn't change the volume."
OUT_OF_RANGE_EN = "I can only set the volume from 0 to 100."

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": list(MODES),
                 "description": "absolute = set a level; relative = change by delta; mute; unmute."},
        "value": {"type": "integer", "minimum": 0, "maximum": 100,
                  "description": "Target level in percent; only with mode=absolute."},
        "delta": {"type": "integer", "minimum": -100, "maximum": 100, "not": {"const": 0},
                  "description": "Signed change in percentage points (+ louder, - quieter); only with mode=relative."},
    },
    "required": ["mode"],
    "additionalProperties": False,
    "allOf": [
        {"if": {"properties": {"mode": {"const": "absolute"}}, "required": ["mode"]},
         "then": {"required": ["value"], "not": {"required": ["delta"]}}},
        {"if": {"properties": {"mode": {"const": "relative"}}, "required": ["mode"]},
         "then": {"required": ["delta"], "not": {"required": ["value"]}}},
        {"if": {"properties": {"mode": {"enum": ["mute", "unmute"]}}, "required": ["mode"]},
         "then": {"not": {"anyOf": [{"required": ["value"]}, {"required": ["delta"]}]}}},
    ],
}

def _question(ctx: ResolveContext) -> str:
    return QUESTION_ZH if wants_chinese(ctx.utterance, ctx.locale) else QUESTION_EN


def _direction_question(ctx: ResolveContext) -> str:
    return DIRECTION_ZH if wants_chinese(ctx.utterance, ctx.locale) else DIRECTION_EN


def _range_error(arguments: Mapping[str, Any]) -> Resolution | None:
    """out_of_range when value/delta cannot be executed; None when fine."""
    value, delta = arguments.get("value"), arguments.get("delta")
    if isinstance(value, int) and not 0 <= value <= 100:
        return Resolution(arguments=dict(arguments), error=f"volume {value} is outside 0..100",
                          error_code="out_of_range")
    if isinstance(delta, int) and not (delta != 0 and -100 <= delta <= 100):
        return Resolution(arguments=dict(arguments), error=f"a change of {delta} is not within ±1..100",
                          error_code="out_of_range")
    return None


def _verdict(said: Said, ctx: ResolveContext, step: int, extra: Mapping[str, Any] | None = None) -> Resolution:
    """Arguments, or the one focused question, for what has been settled."""
    if said.mode in ("mute", "unmute"):
        return Resolution(arguments={"mode": said.mode, **(extra or {})})
    if said.choices:
        return Resolution(arguments={}, ambiguous=("mode",), question=_question(ctx))
    if said.mode == "absolute":
        if said.value is None:
            return Resolution(arguments={"mode": "absolute"}, missing=("value",), question=_question(ctx))
        args: dict[str, Any] = {"mode": "absolute", "value": said.value, **(extra or {})}
    elif said.mode == "relative":
        if said.sign is None:
            return Resolution(arguments={"mode": "relative"}, ambiguous=("delta",), question=_direction_question(ctx))
        args = {"mode": "relative", "delta": said.sign * (said.amount if said.amount is not None else step),
                **(extra or {})}
    else:
        question = _direction_question(ctx) if said.torn else _question(ctx)
        return Resolution(arguments={}, missing=("mode",), question=question)
    return _range_error(args) or Resolution(arguments=args)


def parse_utterance(text: str, ctx: ResolveContext, step: int = DEFAULT_STEP) -> Resolution:
    """Read a volume request from the user's words (English or Chinese) without any provider arguments."""
    return _verdict(hear(text, ctx), ctx, step)


_FORBIDDEN = {"absolute": ("delta",), "relative": ("value",), "mute": ("value", "delta"), "unmute": ("value", "delta")}


def resolve(proposed: Mapping[str, Any] | None, ctx: ResolveContext, *, step: int = DEFAULT_STEP) -> Resolution:
    """The child's words first, field by field; proposed arguments (normalized) fill only what the words leave open.

    "set the volume to 30" with a proposed {"mode": "absolute", "value": 80} is 30; "louder" with a proposed
    delta of -20 is +step (the words name the direction, and a proposal that contradicts them says nothing about
    the size); "change the volume" with a proposed 30 is 30. Range is checked before any execution.
    """
    said = hear(ctx.utterance, ctx)
    given = {k: v for k, v in (proposed or {}).items() if k in ("mode", "value", "delta") and v is not None}
    if not given:
        return _verdict(said, ctx, step)
    heard = _verdict(said, ctx, step)
    if heard.error or said.settled():
        return heard  # the words settle everything: nothing is left for a proposal to fill
    try:
        offered = read_proposal(given)
    except KeyError:  # a mode word we do not know
        return Resolution(arguments={}, ambiguous=("mode",), question=_question(ctx))
    except BadNumber as exc:
        return Resolution(arguments={}, error=f"not a whole number: {exc.args[0]!r}", error_code="invalid_arguments")
    if not said.empty:
        return _verdict(merge(said, offered), ctx, step)
    # the words say nothing about the volume: the proposal stands alone, and fields its mode forbids are kept
    # so that the JSON Schema rejects a self-contradicting proposal instead of this resolver picking a side
    extra = {k: given[k] for k in _FORBIDDEN.get(offered.mode or "", ()) if k in given}
    return _verdict(offered, ctx, step, extra)


_GATE_TOPIC = re.compile(r"\b(?:volume|sound|loud|louder|quiet|quieter|softer|un-?mute|mute)\b"
                         r"|音量|声音|大声|小声|静音")
_GATE_CONJUNCTION = re.compile(r"\b(?:and|then|also|but|after|before|remind|search|tell|story)\b"
                               r"|然后|还有|并且|再|和|提醒|搜|查|讲|故事")
# the bare command said to the toy ("turn it down and say goodnight"): its speaker is the one thing it can turn up
# or down; with more words ("turn it up a bit", "turn it down, the TV") "it" may be something else
_GATE_BARE = re.compile(r"(?:please\s+)?turn\s+it\s+(?:up|down)(?:\s+please)?", re.IGNORECASE)
GATE_MAX_WORDS = 8
GATE_MAX_CHARS_ZH = 12


def gate_match(ctx: ResolveContext) -> bool:
    """True only for a short, single, clear volume command that resolves completely without an LLM."""
    s = normalize(ctx.utterance or "").strip()
    if not s or not (_GATE_TOPIC.search(s) or _GATE_BARE.fullmatch(s)) or _GATE_CONJUNCTION.search(s):
        return False
    too_long = len(s) > GATE_MAX_CHARS_ZH if has_cjk(s) else len(s.split()) > GATE_MAX_WORDS
    return not too_long and parse_utterance(s, ctx).complete


_SET_IT = re.compile(r"(?:please\s+)?(?:set|make|turn|put)\s+it\s+(?:up|down|to\b|\d)|调到|调成|调高|调低", re.IGNORECASE)


def _about_sound(ctx: ResolveContext) -> bool:
    """The child's words are about the sound, or are a bare setting ("make it 70", "调到六十": short, and the words
    alone settle a level or a direction) right after the child's previous words were about the sound."""
    if asks_about_sound(ctx.utterance) or asks_for_quiet(ctx.utterance):
        return True
    previous = [m.get("content", "") for m in ctx.history if m.get("role") == "user"][-1:]
    said = normalize(ctx.utterance or "").strip()
    short = len(said) <= GATE_MAX_CHARS_ZH if has_cjk(said) else len(said.split()) <= 5
    heard = hear(said, ctx)
    setting = heard.value is not None or heard.sign is not None
    # "set it to 30" said to a toy: its "it" is the one thing it can turn up or down
    return short and setting and (bool(_SET_IT.match(said)) or (bool(previous) and asks_about_sound(previous[0])))


def supports(arguments: Mapping[str, Any], ctx: ResolveContext) -> bool:
    """A change the model proposed needs the child's words to be about the sound (a weather question became "volume
    20", a joke "+10", and "大熊猫一天吃…" read its 一 as "volume 1" on the real 1.5B model); silencing the toy (mute,
    or level 0) needs them to ask for quiet, or to say the 0 themselves."""
    if not _about_sound(ctx):
        return False
    silencing = arguments.get("mode") == "mute" or (arguments.get("mode") == "absolute" and arguments.get("value") == 0)
    return not silencing or asks_for_quiet(ctx.utterance) or hear(ctx.utterance, ctx).value == 0


def gate_reply(arguments: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """The templated acknowledgement spoken by the offline gate before the change runs."""
    mode = arguments.get("mode")
    if result.get("locale") == "zh":
        if mode == "absolute":
            return f"好的，音量调到{arguments.get('value')}。"
        if mode == "relative":
            return "好的，大声一点。" if arguments.get("delta", 0) > 0 else "好的，小声一点。"
        return "好的，静音了。" if mode == "mute" else "好的，声音回来了。"
    if mode == "absolute":
        return f"Okay, volume {arguments.get('value')}."
    if mode == "relative":
        return "Okay, a bit louder." if arguments.get("delta", 0) > 0 else "Okay, a bit quieter."
    return "Okay, muting now." if mode == "mute" else "Okay, sound is back on."


def failure_line(arguments: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """A short corrective line after a rejected or failed change."""
    chinese = info.get("locale") == "zh"
    if info.get("code") == "out_of_range":
        return "音量只能在0到100之间哦。" if chinese else OUT_OF_RANGE_EN
    return "抱歉，我没能调音量。" if chinese else FAILURE_EN


def _clamp(level: int) -> int:
    return max(0, min(100, int(level)))


def definition(mixer: Mixer, signals: SignalBus | None = None, *, step: int = DEFAULT_STEP) -> EventDefinition:
    """The plugin definition bound to a Mixer port (and an optional SignalBus for VolumeSignal)."""
    if not 1 <= step <= 100:
        raise ValueError("volume step must be 1..100")

    async def handle(arguments: Mapping[str, Any], ctx: ExecutionContext) -> Mapping[str, Any]:
        mode = arguments["mode"]
        try:
            before = await mixer.get()
            if mode == "mute":
                after = await mixer.set_muted(True)
            elif mode == "unmute":
                after = await mixer.set_muted(False)
            else:
                target = arguments["value"] if mode == "absolute" else before.level + arguments["delta"]
                after = await mixer.set_level(_clamp(target))
                if after.muted and after.level > 0:
                    after = await mixer.set_muted(False)
        except MixerError as exc:
            raise EventFailure(exc.code, exc.message, {"available": exc.available}) from exc
        if signals is not None:
            signals.publish(VolumeSignal(level=after.level, muted=after.muted, event_id=ctx.event_id))
        return {"level": after.level, "muted": after.muted, "previous_level": before.level,
                "previous_muted": before.muted}

    return EventDefinition(
        name=NAME,
        version=1,
        tool_name=TOOL_NAME,
        description="Set, raise, lower, mute or unmute the toy's speaker volume.",
        schema=SCHEMA,
        resolver=partial(resolve, step=step),
        handler=handle,
        result_policy=ResultPolicy.SILENT_SUCCESS,
        llm_fallback=True,
        risk=Risk.MEDIUM,
        idempotent=True,
        concurrency_class="device.volume",
        timeout_s=3.0,
        failure_template=failure_line,
        gate_match=gate_match,
        gate_reply=gate_reply,
        supports=supports,
        claims=claims_volume,
        tags=frozenset({"builtin", "device"}),
    )
