"""Turns from the audit log: the `voice.turn` / `turn.completed` records read into one `Turn` per turn, and the
statistics over them (see `toy_runtime.metrics.report` for what is read and how spoken turns are matched)."""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence, TextIO

from ..errors import ToyError

__all__ = [
    "STAT_ROWS", "TEXT_STAGES", "VOICE_STAGES", "AuditScan", "Turn", "TurnEvent", "clock_text", "events_text",
    "load_audit", "parse_audit_lines", "percentile", "short_text", "summary_stats",
]

# Milestones of a spoken turn, in pipeline order: (key in waterfall_ms, legend label of the stage ending there).
VOICE_STAGES: tuple[tuple[str, str], ...] = (
    ("endpoint", "endpointing (VAD hangover)"),
    ("endpoint_decided", "capture (closing frame captured → processed)"),
    ("asr_final", "ASR final"),
    ("first_token", "LLM first token"),
    ("first_text", "first speakable text"),
    ("first_clause_synthesized", "TTS first clause"),
    ("first_audio", "to the speaker"),
)
TEXT_STAGES: tuple[tuple[str, str], ...] = (
    ("first_token", "LLM first token"),
    ("first_speech", "first speech"),
)


# -- the model -------------------------------------------------------------------------------------------


@dataclass
class TurnEvent:
    """One event of a turn: `at_ms` = completion after the turn's origin (spoken turns) or None; `latency_ms` =
    the event's own duration (text turns)."""

    name: str
    status: str | None = None
    at_ms: float | None = None
    latency_ms: float | None = None


@dataclass
class Turn:
    """One turn as the report shows it. Milestones are ms after `origin` ("end of speech" or "turn start")."""

    kind: Literal["voice", "text"]
    label: str
    ts: float | None
    text: str
    milestones: dict[str, float] = field(default_factory=dict)
    events: list[TurnEvent] = field(default_factory=list)
    second_answer_ms: float | None = None
    total_ms: float | None = None
    voice_to_voice_ms: float | None = None
    runtime_added_ms: float | None = None
    ttft_ms: float | None = None
    first_clause_tts_ms: float | None = None
    first_speech_ms: float | None = None
    turn_id: str | None = None
    path: str | None = None
    fault: str | None = None
    terminated: bool = False
    interrupted: bool = False

    @property
    def origin(self) -> str:
        return "end of speech" if self.kind == "voice" else "turn start"


@dataclass
class AuditScan:
    """What was read from an audit log."""

    turns: list[Turn]
    lines: int = 0  # non-blank lines
    malformed: int = 0  # skipped: not JSON, not an object, or a turn record of the wrong shape
    source: str = ""


def _num(value: Any) -> float | None:
    """A finite number or None (booleans, strings such as a redacted "***", NaN are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Malformed(ToyError, ValueError):
    """A record of a known kind with an unusable shape."""

    code = "malformed_record"


def _voice_turn(record: Mapping[str, Any]) -> Turn:
    waterfall = record.get("waterfall_ms")
    if not isinstance(waterfall, Mapping):
        raise _Malformed("voice.turn without waterfall_ms")
    number = record.get("turn")
    text = _str(record.get("text")) or ""
    turn = Turn(kind="voice", label=f"#{number}" if isinstance(number, int) else "voice", ts=_num(record.get("ts")),
                text=text, turn_id=_str(record.get("turn_id")))
    for key, _ in VOICE_STAGES:
        value = _num(waterfall.get(key))
        if value is not None:
            turn.milestones[key] = value
    turn.second_answer_ms = _num(waterfall.get("second_answer_audio"))
    turn.ttft_ms = _num(record.get("provider_ttft_ms"))
    if "first_token" not in turn.milestones and turn.ttft_ms is not None and "asr_final" in turn.milestones:
        # The audit redaction masks keys that contain "token" ("first_token": "***"); the turn is handed to the
        # agent right after the ASR final, so ASR final + provider TTFT is the first token to within a loop hop.
        turn.milestones["first_token"] = round(turn.milestones["asr_final"] + turn.ttft_ms, 1)
    statuses: dict[str, str | None] = {}
    for item in record.get("events") or ():
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            statuses.setdefault(item["name"], _str(item.get("status")))
    for key, value in waterfall.items():
        if isinstance(key, str) and key.startswith("event:"):
            name = key[len("event:"):]
            turn.events.append(TurnEvent(name=name, status=statuses.get(name), at_ms=_num(value)))
    turn.voice_to_voice_ms = _num(record.get("voice_to_voice_ms"))
    if turn.voice_to_voice_ms is None:
        turn.voice_to_voice_ms = turn.milestones.get("first_audio")
    turn.runtime_added_ms = _num(record.get("runtime_added_ms"))
    turn.first_clause_tts_ms = _num(record.get("first_clause_tts_ms"))
    turn.terminated = record.get("terminated") is True
    turn.interrupted = record.get("interrupted") is True
    return turn


def _text_turn(record: Mapping[str, Any], texts: Mapping[str, str]) -> Turn:
    first = record.get("first_answer")
    second = record.get("second_answer")
    if any(answer is not None and not isinstance(answer, Mapping) for answer in (first, second)):
        raise _Malformed("turn.completed with a non-object answer")
    turn_id = _str(record.get("turn_id"))
    label = _text_label(turn_id)
    turn = Turn(kind="text", label=label, ts=_num(record.get("ts")), text=texts.get(turn_id or "", ""),
                turn_id=turn_id, path=_str(record.get("path")), fault=_str(record.get("fault")),
                terminated=record.get("terminated") is True)
    turn.ttft_ms = _num(first.get("ttft_ms")) if first else None
    if turn.ttft_ms is not None:
        turn.milestones["first_token"] = turn.ttft_ms
    turn.first_speech_ms = _num(record.get("first_speech_ms"))
    if turn.first_speech_ms is not None:
        turn.milestones["first_speech"] = turn.first_speech_ms
    turn.second_answer_ms = _num(record.get("second_speech_ms"))
    turn.total_ms = _num(record.get("total_ms"))
    for item in record.get("events") or ():
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            turn.events.append(TurnEvent(name=item["name"], status=_str(item.get("status")),
                                         latency_ms=_num(item.get("latency_ms"))))
    return turn


def _text_label(turn_id: str | None) -> str:
    """`sess_b79b7033c21d.t3` → `c21d.t3`: short, yet turns of different sessions stay apart."""
    if not turn_id:
        return "text"
    session, _, number = turn_id.rpartition(".")
    return f"{session[-4:]}.{number}" if session else turn_id[-8:]


def _fold(voice: Turn, text: Turn) -> None:
    """Give a spoken turn what only its turn.completed record knows."""
    voice.turn_id = voice.turn_id or text.turn_id
    voice.path, voice.fault, voice.total_ms = text.path, text.fault, text.total_ms
    voice.first_speech_ms = text.first_speech_ms
    if voice.ttft_ms is None:
        voice.ttft_ms = text.ttft_ms


def parse_audit_lines(lines: Iterable[str], source: str = "") -> AuditScan:
    """Turns from audit lines (see the module docstring for what is read and how spoken turns are matched)."""
    scan = AuditScan(turns=[], source=source)
    texts: dict[str, str] = {}  # turn_id → utterance, from turn.started
    since_voice: list[Turn] = []  # text turns recorded since the last voice.turn (the newest is its own)
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        scan.lines += 1
        try:
            record = json.loads(line)
        except ValueError:
            scan.malformed += 1
            continue
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            scan.malformed += 1
            continue
        kind = record["kind"]
        try:
            if kind == "turn.started":
                turn_id, text = record.get("turn_id"), record.get("text")
                if isinstance(turn_id, str) and isinstance(text, str):
                    texts[turn_id] = text
            elif kind == "turn.completed":
                turn = _text_turn(record, texts)
                scan.turns.append(turn)
                since_voice.append(turn)
            elif kind == "voice.turn":
                turn = _voice_turn(record)
                own = None
                if turn.turn_id is not None:
                    own = next((t for t in scan.turns if t.kind == "text" and t.turn_id == turn.turn_id), None)
                elif since_voice:
                    own = since_voice[-1]
                if own is not None:
                    _fold(turn, own)
                    scan.turns.remove(own)
                since_voice.clear()
                scan.turns.append(turn)
        except (_Malformed, AttributeError, TypeError, ValueError):
            scan.malformed += 1
    return scan


def open_audit_files(path: str | Path) -> list[TextIO]:
    """Open an audit file and its rotated backups (`FILE.N` … `FILE.1`, FILE); returned oldest first, each read
    whole even if renamed meanwhile. FileNotFoundError when there is none; the caller closes them.

    Safe while the runtime rotates: the live file is opened first, then the backups are listed and opened newest
    first, and a file seen twice (renamed between two opens) is kept once. So a rollover at any moment loses nothing
    but the oldest backup, which it deletes anyway, and no record is read twice (rotation renames, never copies, and
    happens between records)."""
    from toy_runtime.audit.sink import audit_files

    path = Path(path)
    opened: list[TextIO] = []
    seen: set[tuple[int, int]] = set()

    def add(name: Path) -> None:
        try:
            f = name.open("r", encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return  # renamed or dropped by a rollover since it was listed: its content moved on
        info = os.fstat(f.fileno())
        if (info.st_dev, info.st_ino) in seen:
            f.close()
            return
        seen.add((info.st_dev, info.st_ino))
        opened.append(f)

    try:
        add(path)
        for name in reversed(audit_files(path)):  # listed after the live file was opened: see above
            if name != path:
                add(name)
    except BaseException:
        for f in opened:
            f.close()
        raise
    if not opened:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    return opened[::-1]


def load_audit(path: str | Path) -> AuditScan:
    """Read an audit file with its rotated backups, oldest first (open_audit_files); bad lines are only counted."""
    files = open_audit_files(path)
    try:
        return parse_audit_lines(itertools.chain.from_iterable(files), source=str(path))
    finally:
        for f in files:
            f.close()


# -- statistics ------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation (numpy's default); None for no values."""
    data = sorted(values)
    if not data:
        return None
    k = (len(data) - 1) * q / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


STAT_ROWS: tuple[tuple[str, str], ...] = (
    ("voice-to-voice", "voice_to_voice_ms"),
    ("runtime-added", "runtime_added_ms"),
    ("TTFT", "ttft_ms"),
    ("first-clause TTS", "first_clause_tts_ms"),
    ("first speech (text)", "first_speech_ms"),
    ("total (text)", "total_ms"),
)


def summary_stats(turns: Sequence[Turn]) -> dict[str, dict[str, float | int | None]]:
    """n / median / p90 per metric over the turns that have it ("(text)" rows: text-only turns)."""
    out: dict[str, dict[str, float | int | None]] = {}
    for title, attr in STAT_ROWS:
        pool = [t for t in turns if t.kind == "text"] if title.endswith("(text)") else turns
        values = [v for v in (getattr(t, attr) for t in pool) if v is not None]
        out[title] = {"n": len(values), "median": percentile(values, 50), "p90": percentile(values, 90)}
    return out


# -- text for people --------------------------------------------------------------------------------


def clock_text(ts: float | None) -> str:
    """Local HH:MM:SS of an audit timestamp."""
    if ts is None:
        return "--:--:--"
    try:
        return datetime.fromtimestamp(ts).strftime("%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return "--:--:--"


def short_text(text: str, limit: int = 40) -> str:
    """One line, at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def events_text(turn: Turn) -> str:
    """`name (status, +at ms)` of each event, comma-separated."""
    parts = []
    for e in turn.events:
        if e.at_ms is not None:
            when = f"+{e.at_ms:.0f} ms"  # after the turn's origin
        else:
            when = "" if e.latency_ms is None else f"{e.latency_ms:.0f} ms"  # how long it took
        inside = ", ".join(p for p in (e.status, when) if p)
        parts.append(f"{e.name} ({inside})" if inside else e.name)
    return ", ".join(parts)
