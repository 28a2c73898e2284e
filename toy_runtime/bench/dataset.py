"""The labelled conversation dataset: load, validate (pydantic), materialize labels against a pinned clock, check.

One JSON object per line, one conversation each:

    {"id": "en-01", "lang": "en", "turns": [
      {"user": "Remind me to feed the fish in 10 minutes.", "category": "single_event",
       "reply": "Okay, I'll remind you!",                                     # optional: the oracle's first answer
       "expected_events": [{"name": "calendar.schedule.create",
                            "arguments": {"title": "feed the fish", "start_in_minutes": 10}}]}]}

Labels hold *normalized* arguments, except schedule times, which are relative so they can be checked against any
pinned request clock: `start_in_minutes: N`, or `start_local: "HH:MM"` with `day_offset: D` (days after the request
date, in the session time zone). An event whose arguments cannot be settled has `"status": "needs_clarification"`
and only the arguments that are known. Search labels give the query's key words: the actual query matches when it
contains every one (English words; Chinese pieces as substrings).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping
from zoneinfo import ZoneInfo

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ToyError
from ..language import has_cjk

TERMINATE = "session.terminate"
VOLUME = "device.volume.adjust"
SCHEDULE = "calendar.schedule.create"
SEARCH = "knowledge.web.search"
EVENT_NAMES = (TERMINATE, VOLUME, SCHEDULE, SEARCH)
TOOL_NAMES = {TERMINATE: "terminate_session", VOLUME: "adjust_device_volume", SCHEDULE: "add_schedule",
              SEARCH: "web_search"}
CATEGORIES = ("ordinary", "single_event", "ambiguous", "multi_event", "terminate_with_siblings", "search")

DEFAULT_REQUEST_TIME = "2026-03-04T09:30:00+08:00"  # a Wednesday morning
DEFAULT_TIMEZONE = "Asia/Shanghai"
DEFAULT_DATASET = Path("bench/datasets/toy_turns.jsonl")

_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_SCHEDULE_KEYS = {"title", "start_in_minutes", "start_local", "day_offset", "recurrence", "reminder_minutes"}


class DatasetError(ToyError, ValueError):
    """The dataset file is unreadable or a conversation is invalid; the message names the line."""

    code = "invalid_dataset"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ExpectedEvent(_Strict):
    """One event the turn should produce, with its normalized (or relative, for schedules) arguments."""

    name: Literal["session.terminate", "device.volume.adjust", "calendar.schedule.create", "knowledge.web.search"]
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: Literal["succeeded", "needs_clarification"] = "succeeded"

    @model_validator(mode="after")
    def _arguments_fit_the_event(self) -> "ExpectedEvent":
        args, done = self.arguments, self.status == "succeeded"
        if self.name == VOLUME:
            from ..plugins.device_volume import SCHEMA

            if done:
                errors = [e.message for e in Draft202012Validator(SCHEMA).iter_errors(args)]
                if errors:
                    raise ValueError(f"volume arguments {args} are not normalized: {errors[0]}")
            elif set(args) - {"mode", "value", "delta"}:
                raise ValueError(f"unknown volume argument in {args}")
        elif self.name == SCHEDULE:
            unknown = set(args) - _SCHEDULE_KEYS
            if unknown:
                raise ValueError(f"unknown schedule label keys {sorted(unknown)}")
            timed = "start_in_minutes" in args or "start_local" in args
            if done and not (args.get("title") and timed):
                raise ValueError("a succeeded schedule needs title and start_in_minutes or start_local")
            if not done and timed:
                raise ValueError("a schedule that needs clarification must not carry a time")
            if "start_in_minutes" in args and "start_local" in args:
                raise ValueError("give start_in_minutes or start_local, not both")
            if "start_in_minutes" in args and not (isinstance(args["start_in_minutes"], int)
                                                   and args["start_in_minutes"] > 0):
                raise ValueError("start_in_minutes must be a positive integer")
            if "start_local" in args and not _HHMM.match(str(args["start_local"])):
                raise ValueError("start_local must be HH:MM")
            if "day_offset" in args and not (isinstance(args["day_offset"], int) and args["day_offset"] >= 0):
                raise ValueError("day_offset must be a non-negative integer")
        elif self.name == SEARCH:
            if set(args) - {"query", "max_results"}:
                raise ValueError(f"unknown search argument in {args}")
            if done and not str(args.get("query", "")).strip():
                raise ValueError("a succeeded search needs a query")
        elif set(args) - {"reason"}:
            raise ValueError(f"unknown terminate argument in {args}")
        return self


Category = Literal["ordinary", "single_event", "ambiguous", "multi_event", "terminate_with_siblings", "search"]


class Turn(_Strict):
    """One user turn with its labels."""

    user: str = Field(min_length=1)
    category: Category
    expected_events: list[ExpectedEvent] = Field(default_factory=list)
    reply: str | None = Field(None, description="the oracle's visible first answer; a default line when absent")

    @model_validator(mode="after")
    def _category_fits_the_labels(self) -> "Turn":
        names = [e.name for e in self.expected_events]
        statuses = [e.status for e in self.expected_events]
        rule = {
            "ordinary": (not names, "an ordinary turn expects no events"),
            "single_event": (len(names) == 1 and statuses == ["succeeded"],
                             "a single_event turn expects exactly one event that succeeds"),
            "ambiguous": ("needs_clarification" in statuses, "an ambiguous turn expects a needs_clarification event"),
            "multi_event": (len(names) >= 2 and TERMINATE not in names,
                            "a multi_event turn expects two or more events (no terminate)"),
            "terminate_with_siblings": (TERMINATE in names and len(names) >= 2,
                                        "terminate_with_siblings expects terminate plus another event"),
            "search": (SEARCH in names, "a search turn expects knowledge.web.search"),
        }[self.category]
        if not rule[0]:
            raise ValueError(rule[1])
        return self


class Conversation(_Strict):
    """A multi-turn conversation in one language."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    lang: Literal["en", "zh"]
    turns: list[Turn] = Field(min_length=1)

    @field_validator("turns")
    @classmethod
    def _terminate_is_last(cls, turns: list[Turn]) -> list[Turn]:
        for index, turn in enumerate(turns[:-1]):
            if any(e.name == TERMINATE for e in turn.expected_events):
                raise ValueError(f"turn {index + 1} ends the session but is not the last turn")
        return turns


@dataclass(frozen=True)
class Dataset:
    """All conversations of a dataset file, with a lookup from user text to its turn."""

    path: str
    conversations: tuple[Conversation, ...]

    def turns(self) -> Iterator[tuple[Conversation, int, Turn]]:
        """(conversation, 0-based index, turn) for every turn."""
        for conversation in self.conversations:
            for index, turn in enumerate(conversation.turns):
                yield conversation, index, turn

    @property
    def turn_count(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    def by_text(self) -> dict[str, Turn]:
        """Turn labels keyed by the normalized user text (how the oracle recognizes a turn)."""
        return {text_key(turn.user): turn for _, _, turn in self.turns()}

    def subset(self, ids: list[str] | None = None, limit: int | None = None) -> "Dataset":
        """Only the named conversations (in file order), or the first `limit` ones."""
        chosen = [c for c in self.conversations if ids is None or c.id in ids]
        if limit is not None:
            chosen = chosen[:limit]
        return Dataset(self.path, tuple(chosen))

    def stats(self) -> dict[str, Any]:
        """Counts per category, language and event."""
        categories: dict[str, int] = {}
        languages: dict[str, int] = {}
        events: dict[str, int] = {}
        for conversation, _, turn in self.turns():
            categories[turn.category] = categories.get(turn.category, 0) + 1
            languages[conversation.lang] = languages.get(conversation.lang, 0) + 1
            for event in turn.expected_events:
                events[event.name] = events.get(event.name, 0) + 1
        return {"conversations": len(self.conversations), "turns": self.turn_count, "categories": categories,
                "languages": languages, "events": events}


def text_key(text: str) -> str:
    """The form a user text is recognized by: NFKC, trimmed, inner whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a JSONL dataset; raises DatasetError naming the line of the first problem."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from None
    conversations: list[Conversation] = []
    seen_ids: set[str] = set()
    labels: dict[str, tuple[int, Turn]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            conversation = Conversation.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "conversation"
            raise DatasetError(f"{path}:{number}: {where}: {error['msg']}") from None
        if conversation.id in seen_ids:
            raise DatasetError(f"{path}:{number}: duplicate conversation id {conversation.id!r}")
        seen_ids.add(conversation.id)
        for turn in conversation.turns:
            key = text_key(turn.user)
            earlier = labels.get(key)
            # the oracle recognizes a turn by its text: the same words must always carry the same labels
            if earlier is not None and earlier[1].expected_events != turn.expected_events:
                raise DatasetError(f"{path}:{number}: {turn.user!r} is labelled differently on line {earlier[0]}")
            labels.setdefault(key, (number, turn))
        conversations.append(conversation)
    if not conversations:
        raise DatasetError(f"{path}: no conversations")
    return Dataset(str(path), tuple(conversations))


# -- labels against a pinned clock -------------------------------------------------------------------

def concrete_arguments(event: ExpectedEvent, request_time: datetime, timezone: str) -> dict[str, Any]:
    """The normalized arguments a correct run produces (schedule times made absolute; timezone filled in)."""
    args = dict(event.arguments)
    if event.name != SCHEDULE:
        return args
    out: dict[str, Any] = {}
    if args.get("title"):
        out["title"] = args["title"]
    if event.status == "succeeded":
        zone = ZoneInfo(timezone)
        local = request_time.astimezone(zone)
        if "start_in_minutes" in args:
            start = local + timedelta(minutes=args["start_in_minutes"])
        else:
            hour, minute = (int(p) for p in str(args["start_local"]).split(":"))
            day = local.date() + timedelta(days=int(args.get("day_offset", 0)))
            start = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
        out["start_at"] = start.replace(microsecond=0).isoformat(timespec="seconds")
        out["timezone"] = timezone
    for key in ("recurrence", "reminder_minutes"):
        if key in args:
            out[key] = args[key]
    return out


_PUNCT = re.compile(r"[\W_]+", re.UNICODE)


def _norm_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", str(text)).lower()
    return " ".join(_PUNCT.sub(" ", text).split())


def query_matches(expected: str, actual: str) -> bool:
    """Every expected key word is in the actual query (English: as a word; Chinese: as a substring)."""
    words = set(_norm_text(actual).split())
    squeezed = _norm_text(actual).replace(" ", "")
    for token in _norm_text(expected).split():
        if has_cjk(token):
            if token not in squeezed:
                return False
        elif token not in words:
            return False
    return True


def _title_matches(expected: str, actual: str) -> bool:
    a, b = _norm_text(expected), _norm_text(actual)
    if has_cjk(a) or has_cjk(b):
        a, b = a.replace(" ", ""), b.replace(" ", "")
    return a == b


def arguments_match(name: str, expected: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Do the normalized `actual` arguments satisfy the concrete label `expected` (see module doc for leniency)?"""
    if name == TERMINATE:
        return True  # an optional free-text reason is not judged
    if name == VOLUME:
        return dict(expected) == {k: v for k, v in actual.items() if k in ("mode", "value", "delta")}
    if name == SEARCH:
        if not query_matches(str(expected.get("query", "")), str(actual.get("query", ""))):
            return False
        return "max_results" not in expected or expected["max_results"] == actual.get("max_results")
    if name == SCHEDULE:
        if not _title_matches(str(expected.get("title", "")), str(actual.get("title", ""))):
            return False
        if "start_at" in expected:
            try:
                if datetime.fromisoformat(str(actual.get("start_at"))) != datetime.fromisoformat(expected["start_at"]):
                    return False
            except ValueError:
                return False
            if actual.get("timezone") != expected.get("timezone"):
                return False
        if (actual.get("recurrence") or None) != (expected.get("recurrence") or None):
            return False
        return actual.get("reminder_minutes", 0) == expected.get("reminder_minutes", 0)
    return dict(expected) == dict(actual)
