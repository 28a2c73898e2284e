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
from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping

from ..events.definition import EventDefinition, EventFailure, ExecutionContext, Resolution, ResolveContext
from ..events.model import ResultPolicy, Risk
from ..ports.device import Mixer, MixerError
from ..signals import SignalBus, VolumeSignal
from .numbers import NumberSpan, find_numbers, normalize, parse_number
from ..language import has_cjk
from .text import blank_spans, wants_chinese
from .repeats import parse_recurrence, parse_reminder_offset
from .timeparse import parse_when

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

# mode words a provider (or the EventAgent) may use → (mode, direction of a relative change)
_MODE_ALIASES: dict[str, tuple[str, int | None]] = {
    "absolute": ("absolute", None), "set": ("absolute", None), "level": ("absolute", None),
    "relative": ("relative", None), "change": ("relative", None), "adjust": ("relative", None),
    "up": ("relative", 1), "increase": ("relative", 1), "louder": ("relative", 1), "raise": ("relative", 1),
    "down": ("relative", -1), "decrease": ("relative", -1), "quieter": ("relative", -1), "lower": ("relative", -1),
    "mute": ("mute", None), "silence": ("mute", None), "unmute": ("unmute", None),
}

_UNMUTE = re.compile(r"\bun-?mute\b|\bturn\s+(?:the\s+)?(?:sound|volume|audio)\s+back\s+on\b|\bsound\s+back\s+on\b"
                     r"|取消静音|解除静音|关闭静音|关掉静音|恢复声音|打开声音")
_MUTE = re.compile(r"\bmute\b|\bsilence\b|\b(?:turn\s+)?(?:the\s+)?(?:sound|volume|audio)\s+off\b|静音|关掉声音|关闭声音"
                   r"|把声音关")
_MAX = re.compile(r"\bmax(?:imum)?\b|\bfull\s+volume\b|\ball\s+the\s+way\s+up\b|\bloudest\b|最大|最响")
_MIN = re.compile(r"\bmin(?:imum)?\b|\ball\s+the\s+way\s+down\b|\bquietest\b|\blowest\b|最小|最低")
_UP = re.compile(r"\b(?:up|louder|increase|raise|higher|boost|more)\b"
                 r"|调大|调高|开大|放大|加大|提高|增大|增加|升高|大声|大点|大一点|大些|大一些|响一?点|高一?点|加")
_DOWN = re.compile(r"\b(?:down|quieter|softer|lower|decrease|reduce|less|quiet)\b"
                   r"|调小|调低|关小|减小|降低|减少|小声|小点|小一点|小些|小一些|轻一?点|低一?点|减|降")
_A_BIT_ZH = re.compile(r"一点儿?|一些|一下|点儿")  # "a bit", not the number one
_REL_BEFORE = re.compile(r"(?:\bby|(?P<up>调大|调高|加大|增加|提高|升高|加|大)|(?P<down>调小|调低|减小|减少|降低|减|降|小))\s*$")
_TOO_QUIET = re.compile(r"\btoo\s+(?:quiet|soft|low)\b|can'?t\s+hear|太小|太轻|听不见|听不清")
_TOO_LOUD = re.compile(r"\btoo\s+loud\b|太大|太响|太吵")
_ABS_BEFORE = re.compile(r"(?:\bto|\bat|\bvolume|\blevel|\bset|调到|调成|调至|设为|设成|设置为|设置成|设到|开到|放到|变成"
                         r"|改成|改为|到|为|成|音量|声音|百分之)\s*$")


class _BadNumber(ValueError):
    """A proposed argument that is not a whole number."""


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


_VOLUME_AT = re.compile(r"\b(?:volume|sound|level|it)\s+$")


def _volume_numbers(s: str, ctx: ResolveContext) -> list[NumberSpan]:
    """Numbers that may be the volume: numbers inside time words ("in 10 minutes", "明天早上7点") drop out, and
    when several remain, only those right after a volume verb ("to 30", "by 20", "调小二十") count."""
    numbers = find_numbers(blank_spans(s, [m.span() for m in _A_BIT_ZH.finditer(s)]))
    # "调一调" / "试一试": a verb doubled around 一 means "a little", never the number one
    numbers = [n for n in numbers
               if not (s[n.start:n.end] == "一" and 0 < n.start and n.end < len(s) and s[n.start - 1] == s[n.end])]
    if not numbers:
        return numbers
    try:
        spans = list(parse_when(s, ctx.request_time, ctx.timezone).spans)
    except ValueError:  # unknown zone or naive clock: no time words can be recognised
        spans = []
    spans += parse_recurrence(s)[1] + parse_reminder_offset(s)[1]
    # "set the volume at 10" is a level, not ten o'clock
    spans = [(a, b) for a, b in spans
             if not (re.fullmatch(r"\s*at\s+\d{1,3}\s*", s[a:b]) and _VOLUME_AT.search(s[:a]))]
    numbers = [n for n in numbers if not any(a < n.end and n.start < b for a, b in spans)]
    if len({n.value for n in numbers}) <= 1:
        return numbers
    marked = [n for n in numbers if _REL_BEFORE.search(s[: n.start]) or _ABS_BEFORE.search(s[: n.start])]
    return marked if len({n.value for n in marked}) == 1 else numbers


def _direction(s: str) -> int | None:
    """+1 louder, -1 quieter, None when not said or contradictory ("up ... down")."""
    if _TOO_QUIET.search(s):
        return 1
    if _TOO_LOUD.search(s):
        return -1
    up, down = bool(_UP.search(s)), bool(_DOWN.search(s))
    return 1 if up and not down else -1 if down and not up else None


def _whole_number(raw: Any, *, signed: bool) -> int:
    if isinstance(raw, bool):
        raise _BadNumber(raw)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        if raw.is_integer():
            return int(raw)
        raise _BadNumber(raw)
    if isinstance(raw, str):
        text = normalize(raw).strip().removesuffix("%").strip()
        sign = 1
        for prefix, value in (("+", 1), ("-", -1), ("minus ", -1), ("plus ", 1), ("负", -1), ("减", -1), ("加", 1)):
            if signed and text.startswith(prefix):
                sign, text = value, text[len(prefix):].strip()
                break
        number = parse_number(text)
        if number is None:
            raise _BadNumber(raw)
        return sign * number
    raise _BadNumber(raw)


@dataclass(frozen=True)
class _Said:
    """What one source (the child's words, or proposed arguments) settles about a volume change.

    `mode` absolute|relative|mute|unmute or None when not settled; `value` an absolute level; `sign` +1/-1 and
    `amount` (magnitude) of a relative change, each None when left open; `choices` several different numbers were
    said and the level or amount is one of them; `torn` louder and quieter were both said.
    """

    mode: str | None = None
    value: int | None = None
    sign: int | None = None
    amount: int | None = None
    choices: tuple[int, ...] = ()
    torn: bool = False

    def settled(self) -> bool:
        """True when nothing is left open: a mute/unmute, a level, or a change with its direction and size."""
        return self.mode in ("mute", "unmute") or (self.mode == "absolute" and self.value is not None) or (
            self.mode == "relative" and self.sign is not None and self.amount is not None)

    @property
    def empty(self) -> bool:
        """True when nothing about the volume was settled."""
        return self == _Said()


def _hear(text: str, ctx: ResolveContext) -> _Said:
    """What the user's words (English or Chinese) settle, field by field."""
    s = normalize(text or "")
    if _UNMUTE.search(s):
        return _Said(mode="unmute")
    if _MUTE.search(s):
        return _Said(mode="mute")
    direction = _direction(s)
    numbers = _volume_numbers(s, ctx)
    torn = direction is None and bool(_UP.search(s) and _DOWN.search(s))
    if len({n.value for n in numbers}) > 1:
        return _Said(sign=direction, choices=tuple(dict.fromkeys(n.value for n in numbers)), torn=torn)
    if not numbers:
        if _MAX.search(s):
            return _Said(mode="absolute", value=100)
        if _MIN.search(s):
            return _Said(mode="absolute", value=0)
        return _Said(mode="relative", sign=direction) if direction is not None else _Said(torn=torn)
    number = numbers[0]
    before = s[: number.start]
    if rel := _REL_BEFORE.search(before):
        sign = 1 if rel.group("up") else -1 if rel.group("down") else direction  # "调小二十" names its own sign
        return _Said(mode="relative", sign=sign, amount=number.value, torn=torn)
    if _ABS_BEFORE.search(before) or direction is None:
        return _Said(mode="absolute", value=number.value)
    return _Said(mode="relative", sign=direction, amount=number.value)  # "turn it up 20", "louder 20"


def _offered(given: Mapping[str, Any]) -> _Said:
    """What proposed arguments (ChatAgent tool call or EventAgent answer) settle; raises _BadNumber / KeyError."""
    mode = sign = None
    if "mode" in given:
        mode, sign = _MODE_ALIASES[str(given["mode"]).strip().lower()]
    value = _whole_number(given["value"], signed=False) if "value" in given else None
    delta = _whole_number(given["delta"], signed=True) if "delta" in given else None
    if mode is None:
        mode = "absolute" if value is not None and delta is None else "relative" if delta is not None and value is None \
            else None
    amount = None
    if delta is not None:
        amount = abs(delta)
        if sign is None and delta != 0:
            sign = 1 if delta > 0 else -1
    return _Said(mode=mode, value=value, sign=sign, amount=amount)


def _merge(said: _Said, offered: _Said) -> _Said:
    """The child's words win field by field; the proposal only fills what the words leave open."""
    if said.mode in ("mute", "unmute") or said.mode == "absolute":
        return said
    if said.choices:
        # several numbers were said: a proposal may pick one of them, never bring a new one
        if offered.mode == "absolute" and offered.value in said.choices:
            return _Said(mode="absolute", value=offered.value)
        if offered.mode == "relative" and offered.amount in said.choices:
            return _Said(mode="relative", sign=said.sign if said.sign is not None else offered.sign,
                         amount=offered.amount, torn=said.torn)
        return said
    if said.mode == "relative":
        sign = said.sign if said.sign is not None else (None if said.torn else offered.sign)
        amount = said.amount
        if amount is None and offered.mode == "relative" and offered.sign in (None, sign):
            amount = offered.amount  # "louder" leaves the size open; a proposal in the same direction fills it
        return _Said(mode="relative", sign=sign, amount=amount, torn=said.torn)
    if said.torn:  # "up or down?" — the child has not decided; a proposal must not decide for them
        return said
    return offered


def _verdict(said: _Said, ctx: ResolveContext, step: int, extra: Mapping[str, Any] | None = None) -> Resolution:
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
    return _verdict(_hear(text, ctx), ctx, step)


_FORBIDDEN = {"absolute": ("delta",), "relative": ("value",), "mute": ("value", "delta"), "unmute": ("value", "delta")}


def resolve(proposed: Mapping[str, Any] | None, ctx: ResolveContext, *, step: int = DEFAULT_STEP) -> Resolution:
    """The child's words first, field by field; proposed arguments (normalized) fill only what the words leave open.

    "set the volume to 30" with a proposed {"mode": "absolute", "value": 80} is 30; "louder" with a proposed
    delta of -20 is +step (the words name the direction, and a proposal that contradicts them says nothing about
    the size); "change the volume" with a proposed 30 is 30. Range is checked before any execution.
    """
    said = _hear(ctx.utterance, ctx)
    given = {k: v for k, v in (proposed or {}).items() if k in ("mode", "value", "delta") and v is not None}
    if not given:
        return _verdict(said, ctx, step)
    heard = _verdict(said, ctx, step)
    if heard.error or said.settled():
        return heard  # the words settle everything: nothing is left for a proposal to fill
    try:
        offered = _offered(given)
    except KeyError:  # a mode word we do not know
        return Resolution(arguments={}, ambiguous=("mode",), question=_question(ctx))
    except _BadNumber as exc:
        return Resolution(arguments={}, error=f"not a whole number: {exc.args[0]!r}", error_code="invalid_arguments")
    if not said.empty:
        return _verdict(_merge(said, offered), ctx, step)
    # the words say nothing about the volume: the proposal stands alone, and fields its mode forbids are kept
    # so that the JSON Schema rejects a self-contradicting proposal instead of this resolver picking a side
    extra = {k: given[k] for k in _FORBIDDEN.get(offered.mode or "", ()) if k in given}
    return _verdict(offered, ctx, step, extra)


_GATE_TOPIC = re.compile(r"\b(?:volume|sound|loud|louder|quiet|quieter|softer|un-?mute|mute)\b"
                         r"|音量|声音|大声|小声|静音")
_GATE_CONJUNCTION = re.compile(r"\b(?:and|then|also|but|after|before|remind|search|tell|story)\b"
                               r"|然后|还有|并且|再|和|提醒|搜|查|讲|故事")
GATE_MAX_WORDS = 8
GATE_MAX_CHARS_ZH = 12


def gate_match(ctx: ResolveContext) -> bool:
    """True only for a short, single, clear volume command that resolves completely without an LLM."""
    s = normalize(ctx.utterance or "").strip()
    if not s or not _GATE_TOPIC.search(s) or _GATE_CONJUNCTION.search(s):
        return False
    too_long = len(s) > GATE_MAX_CHARS_ZH if has_cjk(s) else len(s.split()) > GATE_MAX_WORDS
    return not too_long and parse_utterance(s, ctx).complete


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
        tags=frozenset({"builtin", "device"}),
    )
