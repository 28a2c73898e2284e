"""`calendar.schedule.create`: add a reminder/calendar entry at a precise future time through the CalendarStore port.

Arguments: `title`, RFC3339 `start_at` with an offset, IANA `timezone`, optional `recurrence`
({"frequency": "daily" | "weekdays"} or {"frequency": "weekly", "days": ["MO", "WE"]}), optional
`reminder_minutes` >= 0 (advance warning). Times come from structured values or from the utterance via
`timeparse` against the captured request time and zone; vague times are never guessed (→ clarification).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Mapping

from ..errors import ToyError
from ..events.definition import EventDefinition, EventFailure, ExecutionContext, Resolution, ResolveContext
from ..events.model import ResultPolicy, Risk
from ..ports.calendar import CalendarStorageError, CalendarStore, ScheduleRequest
from .numbers import parse_number
from .calendar_speech import confirmation, failure_line
from .claims import claims_reminder
from .intent import says_repeat
from .repeats import parse_recurrence, parse_reminder_offset
from ..language import has_cjk
from .text import blank_spans, collapse_spaces, wants_chinese
from .timeparse import (
    DEFAULT_DAYPARTS,
    WEEKDAY_CODES,
    DayParts,
    is_after,
    localize,
    normalize_text,
    parse_iso,
    parse_when,
    rfc3339,
    zone_of,
)

NAME = "calendar.schedule.create"
TOOL_NAME = "add_schedule"
NOT_STORED = "not_stored"  # the error code of a reminder the store refused (calendar_speech says so)
MAX_TITLE = 200
MAX_REMINDER_MINUTES = 7 * 24 * 60

_RFC3339 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE, "pattern": r"\S",
                  "description": "What to remind the user about, e.g. 'brush my teeth'."},
        "start_at": {"type": "string", "pattern": _RFC3339,
                     "description": "RFC3339 date-time with offset, e.g. 2026-12-01T07:00:00+08:00."},
        "timezone": {"type": "string", "minLength": 1, "pattern": r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*$",
                     "description": "IANA time zone, e.g. Asia/Shanghai."},
        "recurrence": {
            "type": "object",
            "properties": {
                "frequency": {"type": "string", "enum": ["daily", "weekly", "weekdays"]},
                "days": {"type": "array", "items": {"type": "string", "enum": list(WEEKDAY_CODES)},
                         "minItems": 1, "maxItems": 7, "uniqueItems": True},
            },
            "required": ["frequency"],
            "additionalProperties": False,
            "if": {"properties": {"frequency": {"const": "weekly"}}},
            "then": {"required": ["days"]},
            "else": {"not": {"required": ["days"]}},
            "description": "Optional repeat rule; weekly needs days like ['MO', 'WE'].",
        },
        "reminder_minutes": {"type": "integer", "minimum": 0, "maximum": MAX_REMINDER_MINUTES,
                             "description": "Optional advance warning in minutes."},
    },
    "required": ["title", "start_at", "timezone"],
    "additionalProperties": False,
}

_DAY_NAMES = {"mo": "MO", "mon": "MO", "monday": "MO", "tu": "TU", "tue": "TU", "tues": "TU", "tuesday": "TU",
              "we": "WE", "wed": "WE", "wednesday": "WE", "th": "TH", "thu": "TH", "thur": "TH", "thurs": "TH",
              "thursday": "TH", "fr": "FR", "fri": "FR", "friday": "FR", "sa": "SA", "sat": "SA", "saturday": "SA",
              "su": "SU", "sun": "SU", "sunday": "SU"}

# words around the title that are not part of it
_EN_LEAD = re.compile(
    r"^(?:(?:hey|hi|ok|okay|so|um|uh|please|and|also|then|to|about|for|that|of)\b[\s,!]*"
    r"|(?:can|could|would|will)\s+you\s+"
    r"|(?:remind|tell|ping|alert)\s+me\b"
    r"|i\s+(?:need|have|want)\s+to\b"
    r"|(?:set|make|create|add|put)\s+(?:up\s+)?(?:a|an|my)?\s*(?:reminder|alarm|schedule|event|entry|appointment)\b"
    r"|schedule\b|remember\s+to\b|don'?t\s+let\s+me\s+forget(?:\s+to)?\b)\s*", re.IGNORECASE)
# where the activity starts in a longer request ("turn it up and remind me to X" → "X")
_EN_MARKER = re.compile(r"\b(?:remind|tell|ping|alert)\s+me\s+(?:to|about|of|that)\b|\bdon'?t\s+let\s+me\s+forget"
                        r"(?:\s+to)?\b|\bremember\s+to\b|\breminder\s+(?:to|about|for)\b", re.IGNORECASE)
_ZH_MARKER = re.compile(r"提醒我|叫我|喊我|通知我|的提醒[:：]?")
_EN_WAKE = re.compile(r"^(?:please\s+)?wake\s+me(?:\s+up)?\b", re.IGNORECASE)
_EN_TRAIL = re.compile(r"(?:[\s,;:]*(?:please|thanks|thank\s+you|for\s+me|ok|okay|and)\b)+[\s.!?,;:]*$"
                       r"|[\s.!?,;:]+$", re.IGNORECASE)
_ZH_FILLER = re.compile(r"请|麻烦你?|帮我|给我|记得|记住|别忘了|提醒我|提醒一下|叫我|喊我|通知我|让我"
                        r"|(?:设置?|定|加|添加|建|创建)(?:一?个)?的?(?:提醒|日程|闹钟|事项)|的提醒[:：]?")
_ZH_LEAD = re.compile(r"^(?:[的要:：,，、\s]|一下|提醒)+")
_ZH_TRAIL = re.compile(r"(?:吧|哦|啊|呀|哈|嘛|一下|好吗|好不好|可以吗|行吗|谢谢|了|[。！!？?,，、;；:：\s])+$")



class _Invalid(ToyError, ValueError):
    """A proposed value that cannot be used; `code` is the error code to report."""

    code = "invalid_value"  # the default; each raise names its own

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# -- titles ------------------------------------------------------------------------------------------

# Where a multi-request sentence moves on to another request: "…feed the cat and make it louder", "…刷牙，然后静音".
_EN_NEXT_REQUEST = re.compile(
    r"\s*(?:,|;|\band\b|\bthen\b|\balso\b)+\s*(?:then\s+|also\s+|please\s+)?(?=(?:make|turn|set|put|change|"
    r"mute|unmute|look|search|find|check|tell|say|bye|goodbye|good\s*night|stop|remind|be\s+(?:quiet|louder))\b)",
    re.IGNORECASE)
_ZH_NEXT_REQUEST = re.compile(r"\s*(?:[，,；;]|然后|还有|再|并且|和)+\s*(?=(?:说|跟我说)?(?:把|调|声音|音量|大声|小声|静音|取消静音|搜|查|"
                              r"晚安|再见|拜拜|提醒|告诉))")


def _first_request(s: str) -> str:
    """The part of a sentence that belongs to this request: it ends where the next request starts."""
    pattern = _ZH_NEXT_REQUEST if has_cjk(s) else _EN_NEXT_REQUEST
    match = pattern.search(s)
    return s[: match.start()] if match and s[: match.start()].strip() else s


def extract_title(text: str, spans=()) -> str:
    """The activity in an utterance once the time words (`spans` of `normalize_text(text)`) are removed.

    "remind me to brush my teeth tomorrow at 7 am" → "brush my teeth"; "明天早上7点提醒我刷牙" → "刷牙".
    """
    s = blank_spans(normalize_text(text), spans)
    marker = _ZH_MARKER if has_cjk(s) else _EN_MARKER
    found = list(marker.finditer(s))
    if found and s[found[-1].end():].strip(" ,.!?;:，。！？；：、吧一下"):
        s = s[found[-1].end():]  # the words after the last "remind me to" are the activity
    s = _first_request(s)
    if has_cjk(s):
        s = collapse_spaces(_ZH_FILLER.sub(" ", collapse_spaces(s)))
        s = _ZH_TRAIL.sub("", _ZH_LEAD.sub("", s))
        return collapse_spaces(s)[:MAX_TITLE]
    s = collapse_spaces(s)
    s = _EN_WAKE.sub("wake up", s)
    previous = None
    while previous != s:
        previous = s
        s = _EN_LEAD.sub("", s, count=1).strip(" ,;:")
        s = _EN_TRAIL.sub("", s).strip()
    return s[:MAX_TITLE]


# -- structured values --------------------------------------------------------------------------------

def _recurrence(raw: Any) -> dict[str, Any] | None:
    if raw in ("", {}, "none", "once"):
        return None
    if isinstance(raw, str):
        parsed, _ = parse_recurrence(raw)
        if parsed is None:
            raise _Invalid("invalid_recurrence", f"unsupported recurrence {raw!r}")
        return parsed
    if not isinstance(raw, Mapping):
        raise _Invalid("invalid_recurrence", "recurrence must be an object")
    frequency = str(raw.get("frequency", "")).strip().lower()
    if frequency in ("", "none", "once"):
        return None
    if frequency not in ("daily", "weekly", "weekdays"):
        raise _Invalid("invalid_recurrence", f"unsupported recurrence frequency {frequency!r}")
    if frequency != "weekly":
        return {"frequency": frequency}
    days = raw.get("days") or []
    if isinstance(days, str):
        days = re.split(r"[\s,;]+", days.strip())
    codes = set()
    for day in days:
        code = _DAY_NAMES.get(str(day).strip().lower())
        if code is None:
            raise _Invalid("invalid_recurrence", f"unknown weekday {day!r}")
        codes.add(code)
    return {"frequency": "weekly", "days": [c for c in WEEKDAY_CODES if c in codes]}


def _reminder(raw: Any) -> int:
    if isinstance(raw, bool):
        raise _Invalid("invalid_reminder", "reminder_minutes must be a number of minutes")
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, str):
        raw = parse_number(raw.strip().removesuffix("minutes").removesuffix("分钟").strip())
    if not isinstance(raw, int) or not 0 <= raw <= MAX_REMINDER_MINUTES:
        raise _Invalid("invalid_reminder", f"reminder_minutes must be 0..{MAX_REMINDER_MINUTES}")
    return raw


def _start(raw: Any, ctx: ResolveContext, tz: str, weekdays,
           dayparts: DayParts) -> tuple[datetime | None, str | None]:
    """A proposed start → (aware datetime, None) | (None, day phrase of a vague value)."""
    zone = zone_of(tz)
    if isinstance(raw, datetime):
        return (raw.astimezone(zone) if raw.tzinfo else raw.replace(tzinfo=zone)), None
    text = str(raw).strip()
    when = parse_iso(text, zone)
    if when is not None:
        return when, None
    if re.match(r"^\d{4}-\d{2}-\d{2}(?:[T ]|$)", text):
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return None, None  # a date without a time: ask for the time
        raise _Invalid("invalid_time", f"start_at {text!r} is not an RFC3339 date-time")
    match = parse_when(text, ctx.request_time, tz, weekdays=weekdays, dayparts=dayparts)
    return match.when, match.day_phrase


# -- resolver ------------------------------------------------------------------------------------------

TIME_QUESTION_EN = "What time should I remind you?"
TIME_QUESTION_ZH = "你想让我几点提醒你？"
# how this plugin's own questions end (`_time_question`, the past-time failure line): the child's next words answer
# them, so the request they answer is read together with the answer
_OUR_QUESTION = re.compile(r"should I remind you\?|remind you about(?:, and when)?\?|提醒你[？?]|提醒你什么|要改到什么时候")


def _time_question(chinese: bool, day_phrase: str | None) -> str:
    if chinese:
        return f"{day_phrase}几点提醒你？" if day_phrase and has_cjk(day_phrase) else TIME_QUESTION_ZH
    if day_phrase and not has_cjk(day_phrase):
        return f"What time {day_phrase} should I remind you?"
    return TIME_QUESTION_EN


def _weekdays_of(recurrence: Mapping[str, Any] | None) -> set[int] | None:
    if not recurrence:
        return None
    if recurrence["frequency"] == "weekdays":
        return {0, 1, 2, 3, 4}
    if recurrence["frequency"] == "weekly" and recurrence.get("days"):
        return {WEEKDAY_CODES.index(d) for d in recurrence["days"]}
    return None


def _answered_request(ctx: ResolveContext) -> str:
    """The child's earlier request when the toy's last line was this plugin's question, else "".

    "remind me to water the plants" → "What time should I remind you?" → "at 5 pm": the answer alone has no title,
    and "tomorrow morning" → "What time tomorrow morning should I remind you?" → "at 7" has no day.
    """
    history = list(ctx.history)
    if len(history) < 2 or history[-1].get("role") != "assistant" or history[-2].get("role") != "user":
        return ""
    if not _OUR_QUESTION.search(normalize_text(history[-1].get("content", ""))):
        return ""
    return normalize_text(history[-2].get("content", ""))


def _stated_title(text: str) -> bool:
    """True when the words name the activity ("remind me to …", "提醒我…", "wake me up"), not just leftovers."""
    return bool(_EN_MARKER.search(text) or _EN_WAKE.search(text) or _ZH_MARKER.search(text))


# "remind me (tomorrow) to …", "set a reminder", "wake me up": a reminder request, not "remind me what pandas eat"
_EN_GATE_MARKER = re.compile(
    r"\b(?:remind|ping|alert)\s+me\b(?!\s+(?:what|how|who|why|where|which|when|if|whether)\b)"
    r"|\b(?:set|make|create|add|put)\s+(?:up\s+)?(?:a|an|my)?\s*(?:reminder|alarm)\b"
    r"|\bdon'?t\s+let\s+me\s+forget\b|\bwake\s+me(?:\s+up)?\b", re.IGNORECASE)
_TITLE_QUESTION = re.compile(r"remind you about|提醒你什么")
# a request joined on before "remind me" ("turn it down and remind me to …"): the sentence asks for two things
_EN_JOINED_BEFORE = re.compile(r"\b(?:and|then|also)\b", re.IGNORECASE)
_ZH_JOINED_BEFORE = re.compile(r"然后|还有|并且|再")


def gate_match(ctx: ResolveContext) -> bool:
    """True for a clear reminder request the resolver handles without a model, so that offline the toy makes the
    schedule (or asks its one question) instead of saying it cannot think.

    Clear: the utterance states the reminder ("remind me to …", "提醒我…", "wake me up …", "don't let me forget …")
    and asks for nothing else before or after it, or it answers this plugin's own question with a time ("at 5 pm").
    A sentence that also asks for something else is left to the model (offline: the offline line), so no part of it
    is silently dropped.
    """
    s = normalize_text(ctx.utterance).strip()
    if not s:
        return False
    if _answered_request(ctx):
        if _TITLE_QUESTION.search(normalize_text(ctx.history[-1].get("content", ""))):
            return True  # "What should I remind you about?" → "feeding the fish"
        try:
            return bool(parse_when(s, ctx.request_time, ctx.timezone).spans)
        except ValueError:  # an unknown session zone: the resolver reports it, the gate does not guess
            return False
    chinese = has_cjk(s)
    marker = (_ZH_MARKER if chinese else _EN_GATE_MARKER).search(s)
    if marker is None:
        return False
    joined = (_ZH_JOINED_BEFORE if chinese else _EN_JOINED_BEFORE).search(s[:marker.start()])
    return joined is None and _first_request(s) == s


def _words(utterance: str, earlier: str, tz: str, ctx: ResolveContext, dayparts: DayParts):
    """What the child's words say: (text, recurrence, reminder, spans, time match).

    The earlier request and the answer are read as one request; when together they are not precise (the answer
    replaced a time said before) the answer's own time counts.
    """
    texts = [f"{earlier}, {utterance}", utterance] if earlier else [utterance]
    readings = []
    for text in texts:
        recurrence, rec_spans = parse_recurrence(text)
        reminder, rem_spans = parse_reminder_offset(text)
        spoken = parse_when(blank_spans(text, rec_spans + rem_spans), ctx.request_time, tz,
                            weekdays=_weekdays_of(recurrence), repeating=recurrence is not None,
                            dayparts=dayparts)
        readings.append((text, recurrence, reminder, rec_spans + rem_spans + spoken.spans, spoken))
        if spoken.found:
            break
    return next((r for r in readings if r[4].found), readings[0])


def resolve(proposed: Mapping[str, Any] | None, ctx: ResolveContext, *,
            dayparts: DayParts = DEFAULT_DAYPARTS) -> Resolution:
    """The child's words first; proposed values fill only what the words leave open; no time said → ask.

    - Time: a time the child said wins over any proposed `start_at`; a part of day without an hour ("tomorrow
      morning") is the household's time for it (`dayparts`). When the child said no time, or only a vague one
      ("tomorrow", "later"), the answer is a clarification question: a proposed time (ChatAgent tool
      call or EventAgent answer) is never accepted, because both invocation modes must give the same result and
      a guessed time is a side effect the child did not ask for. Without any words (a structured command from
      `events resolve` or a remote client) the proposed `start_at` is the request.
    - Title, repeat rule and advance warning: stated in the words ("remind me to …", "every day", "10 minutes
      before") they win; otherwise the proposal fills them, and words left over after the time is taken out are
      the title only when nothing else names one.
    - Zone: the words are read in the session's zone; a proposed zone counts only for a structured command.
    """
    given = {k: v for k, v in (proposed or {}).items() if v is not None}
    utterance = normalize_text(ctx.utterance).strip()
    title_given = collapse_spaces(str(given["title"]))[:MAX_TITLE] if "title" in given else ""
    tz = str((given.get("timezone") if not utterance else None) or ctx.timezone).strip()
    try:
        zone_of(tz)
    except ValueError:
        return Resolution(arguments={}, error=f"unknown time zone {tz!r}", error_code="unknown_timezone")
    args: dict[str, Any] = {"timezone": tz}

    earlier = _answered_request(ctx) if utterance else ""
    text, recurrence, reminder, spans, spoken = _words(utterance, earlier, tz, ctx, dayparts)
    chinese = has_cjk(title_given) or wants_chinese(text, ctx.locale)
    try:
        # a proposed repeat rule stands only when the child said a repeat word, or said nothing (a structured
        # command): "tomorrow at three" must not become daily, "on Saturday" weekly (issue 27)
        if recurrence is None and "recurrence" in given and (not utterance or says_repeat(text)):
            recurrence = _recurrence(given["recurrence"])
        if reminder is None and "reminder_minutes" in given:
            reminder = _reminder(given["reminder_minutes"])
        if utterance:
            when, day_phrase, vague = spoken.when, spoken.day_phrase, spoken.vague
        elif "start_at" in given:
            when, day_phrase = _start(given["start_at"], ctx, tz, _weekdays_of(recurrence), dayparts)
            vague = True  # a proposed value that is not a precise time was meant to be one
        else:
            when, day_phrase, vague = None, None, False
    except _Invalid as exc:
        return Resolution(arguments=args, error=str(exc), error_code=exc.code)

    heard_title = extract_title(text, spans) if text else ""
    title = (heard_title if heard_title and _stated_title(text) else "") or title_given or heard_title
    if title:
        args["title"] = title
    if recurrence is not None:
        args["recurrence"] = recurrence
    if reminder is not None:
        args["reminder_minutes"] = reminder

    if when is None:
        # a time that was said but is not precise is "ambiguous"; no time at all is "missing"
        if not title:
            question = "要提醒你什么，什么时候提醒？" if chinese else "What should I remind you about, and when?"
        else:
            question = _time_question(chinese, day_phrase)
        # with words, only the child can give the time: the EventAgent is not asked to guess it
        return Resolution(arguments=args, missing=(() if title else ("title",)) + (() if vague else ("start_at",)),
                          ambiguous=("start_at",) if vague else (), question=question, needs_user=bool(utterance))
    zone = zone_of(tz)
    when = when.astimezone(zone)
    allowed = _weekdays_of(recurrence)
    if allowed and when.weekday() not in allowed:
        # "starting tomorrow, every Monday": the first occurrence is the first rule day on or after the start
        day = when.date()
        while day.weekday() not in allowed:
            day += timedelta(days=1)
        when = localize(day, when.hour, when.minute, zone)
    if not is_after(when, ctx.request_time):
        return Resolution(arguments=args, error=f"{rfc3339(when)} is already in the past", error_code="past_time",
                          question=_time_question(chinese, None))
    args["start_at"] = rfc3339(when)
    if recurrence is not None and recurrence["frequency"] == "weekly" and not recurrence.get("days"):
        args["recurrence"] = {"frequency": "weekly", "days": [WEEKDAY_CODES[when.weekday()]]}
    if not title:
        return Resolution(arguments=args, missing=("title",),
                          question="要提醒你什么呢？" if chinese else "What should I remind you about?")
    return Resolution(arguments=args)


def definition(store: CalendarStore, *, dayparts: DayParts = DEFAULT_DAYPARTS) -> EventDefinition:
    """The plugin definition bound to a CalendarStore port and the household's part-of-day times."""

    async def handle(arguments: Mapping[str, Any], ctx: ExecutionContext) -> Mapping[str, Any]:
        request = ScheduleRequest(
            title=arguments["title"],
            start_at=datetime.fromisoformat(arguments["start_at"]),
            timezone=arguments["timezone"],
            recurrence=arguments.get("recurrence"),
            reminder_minutes=arguments.get("reminder_minutes", 0),
        )
        try:
            entry, created = await store.create(request, ctx.idempotency_key)
        except CalendarStorageError as exc:  # the child hears it was not saved; never a promise that did not hold
            raise EventFailure(NOT_STORED, f"the reminder was not stored: {exc}") from exc
        return {**entry.as_dict(), "created": created}

    return EventDefinition(
        name=NAME,
        version=1,
        tool_name=TOOL_NAME,
        description="Create a reminder or calendar entry at a specific future time, optionally repeating.",
        schema=SCHEMA,
        resolver=partial(resolve, dayparts=dayparts),
        handler=handle,
        result_policy=ResultPolicy.TEMPLATE_FOLLOW_UP,
        llm_fallback=True,
        risk=Risk.MEDIUM,
        idempotent=True,
        concurrency_class="calendar.write",
        timeout_s=3.0,
        success_template=confirmation,
        failure_template=failure_line,
        tags=frozenset({"builtin", "calendar"}),
        # offline (or after a failed model call) a clear reminder request is still made; what is said is the
        # resolver's question or, once stored, the confirmation, so the gate speaks nothing of its own before it
        gate_match=gate_match,
        claims=claims_reminder,
    )
