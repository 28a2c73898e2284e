"""The calendar store on SQLite (stdlib sqlite3): durable, idempotent schedules plus the fired-reminder record.

Durability: WAL journal with synchronous=FULL, and `create()` returns only after COMMIT, so an acknowledged schedule
survives a crash or power cut before its confirmation is spoken. The idempotency key is a UNIQUE column: a repeated
or retransmitted event finds the first row instead of inserting a second, across restarts too. Fired occurrences are
UNIQUE(entry_id, occurrence_at), so a reminder is never recorded (and hence never fired) twice.

Datetimes are stored as UTC text "YYYY-MM-DDTHH:MM:SSZ" (one-second resolution, sortable) next to the entry's IANA
zone; entries are returned with `start_at` in their own zone. Several processes (the runtime, `toy-runtime schedules`)
may share the file: writes take the lock up front (BEGIN IMMEDIATE) and wait up to `busy_timeout_ms`.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import os
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from ..errors import ToyError
from ..ports.calendar import OUTCOMES, CalendarStorageError, DueOccurrence, Outcome, ScheduleEntry, ScheduleRequest
from ..ports.clock import Clock, SystemClock
from ..scheduling import recurrence
from ..scheduling.recurrence import RecurrenceError, next_occurrence, normalize_recurrence, reminder_time, zone

log = logging.getLogger(__name__)

UTC = timezone.utc
T = TypeVar("T")

MAX_REMINDER_MINUTES = 7 * 24 * 60
STATUSES = ("active", "cancelled", "done")
# the primary result codes of a storage that refuses writes (the port's CalendarStorageError), not of a bad query
_STORAGE_CODES = {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN}
_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

# Migration N brings the schema from version N-1 to N. Append, never edit a released step.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE entries (
            id               TEXT PRIMARY KEY,
            title            TEXT NOT NULL,
            start_at         TEXT NOT NULL,              -- UTC, YYYY-MM-DDTHH:MM:SSZ
            timezone         TEXT NOT NULL,              -- IANA zone the wall-clock time belongs to
            recurrence       TEXT,                       -- canonical JSON rule, NULL = one-off
            reminder_minutes INTEGER NOT NULL DEFAULT 0 CHECK (reminder_minutes >= 0),
            idempotency_key  TEXT NOT NULL UNIQUE,
            created_at       TEXT NOT NULL,
            status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'cancelled', 'done')),
            meta             TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX entries_status ON entries(status)",
        """CREATE TABLE fired (
            entry_id      TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            occurrence_at TEXT NOT NULL,                 -- UTC start of the occurrence
            outcome       TEXT NOT NULL CHECK (outcome IN ('spoken', 'missed')),
            fired_at      TEXT NOT NULL,
            UNIQUE (entry_id, occurrence_at)
        )""",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)


class CalendarSchemaError(ToyError, RuntimeError):
    """The database was written by a newer toy-runtime (schema version above the one this code knows)."""

    code = "calendar_schema_newer"


@dataclass(frozen=True)
class FiredRecord:
    """One handled occurrence: spoken or recorded as missed."""

    entry_id: str
    occurrence_at: datetime
    outcome: str
    fired_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "occurrence_at": self.occurrence_at.isoformat(),
            "outcome": self.outcome,
            "fired_at": self.fired_at.isoformat(),
        }


def utc_text(when: datetime) -> str:
    """The canonical stored form of an aware datetime."""
    if when.tzinfo is None:
        raise ValueError("datetime must be timezone-aware")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: str) -> datetime:
    """Inverse of utc_text."""
    return datetime.fromisoformat(text).astimezone(UTC)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to SCHEMA_VERSION (PRAGMA user_version), one transaction per step; return the version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise CalendarSchemaError(
            f"calendar database schema v{version} is newer than this toy-runtime supports (v{SCHEMA_VERSION})"
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= target:
                conn.execute("ROLLBACK")
                continue
            for statement in _MIGRATIONS[target - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target:d}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return conn.execute("PRAGMA user_version").fetchone()[0]


def _validate(request: ScheduleRequest, idempotency_key: str) -> tuple[str, dict[str, Any] | None]:
    title = (request.title or "").strip()
    if not title:
        raise ValueError("schedule title is empty")
    if not idempotency_key:
        raise ValueError("idempotency key is empty")
    if request.start_at.tzinfo is None:
        raise ValueError("start_at must be timezone-aware")
    zone(request.timezone)  # raises RecurrenceError (a ValueError) for an unknown zone
    minutes = request.reminder_minutes
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 0 <= minutes <= MAX_REMINDER_MINUTES:
        raise ValueError(f"reminder_minutes must be an integer in 0..{MAX_REMINDER_MINUTES}")
    return title, normalize_recurrence(request.recurrence)


class SqliteCalendarStore:
    """CalendarStore + ReminderStore on one SQLite file. All methods are async; the work runs in a worker thread.

    One connection guarded by a lock: the runtime writes a handful of rows a day, so serialising is cheaper than a
    connection per thread and keeps transactions simple.
    """

    def __init__(self, path: str | os.PathLike[str], *, clock: Clock | None = None, busy_timeout_ms: int = 5000):
        self.path = Path(path)
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a commit is exactly where we say it is.
        self._conn = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
        )
        try:
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms):d}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            # FULL: the WAL is fsynced at every COMMIT (NORMAL would only sync at checkpoints in WAL mode).
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self.schema_version = migrate(self._conn)
        except BaseException as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.OperationalError) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in \
                    _STORAGE_CODES:
                raise CalendarStorageError(f"{self.path}: {exc}") from exc
            raise

    # -- plumbing -----------------------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                try:
                    return fn(self._conn)
                except sqlite3.OperationalError as exc:
                    if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _STORAGE_CODES:
                        raise CalendarStorageError(f"{self.path}: {exc}") from exc
                    raise
                except OSError as exc:
                    raise CalendarStorageError(f"{self.path}: {exc}") from exc

        # A cancelled caller does not abort the thread: a started write finishes (or rolls back) as a unit.
        return await asyncio.to_thread(locked)

    @staticmethod
    @contextmanager
    def _tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite has already rolled back after some errors (SQLITE_FULL, I/O)
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a COMMIT the disk refused leaves the transaction open: nothing is kept
                conn.execute("ROLLBACK")
            raise

    def _entry(self, row: sqlite3.Row) -> ScheduleEntry:
        tz = row["timezone"]
        start = parse_utc(row["start_at"])
        try:
            start = start.astimezone(zone(tz))
        except RecurrenceError:
            log.warning("schedule %s has unknown zone %r; showing UTC", row["id"], tz)
        return ScheduleEntry(
            id=row["id"],
            title=row["title"],
            start_at=start,
            timezone=tz,
            recurrence=json.loads(row["recurrence"]) if row["recurrence"] else None,
            reminder_minutes=row["reminder_minutes"],
            idempotency_key=row["idempotency_key"],
            created_at=parse_utc(row["created_at"]),
            status=row["status"],
            meta=json.loads(row["meta"] or "{}"),
        )

    async def pragmas(self) -> dict[str, Any]:
        """The connection's durability settings (for diagnostics): journal_mode, synchronous, user_version."""

        def work(conn: sqlite3.Connection) -> dict[str, Any]:
            return {
                "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                "synchronous": _SYNC_NAMES[conn.execute("PRAGMA synchronous").fetchone()[0]],
                "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
                "foreign_keys": bool(conn.execute("PRAGMA foreign_keys").fetchone()[0]),
            }

        return await self._run(work)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> "SqliteCalendarStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "SqliteCalendarStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- CalendarStore --------------------------------------------------------------------------------------------

    async def create(self, request: ScheduleRequest, idempotency_key: str) -> tuple[ScheduleEntry, bool]:
        """Insert unless the key exists; returns (the entry for this key, created). Durable when it returns."""
        title, rule = _validate(request, idempotency_key)
        row_values = (
            "sch_" + uuid.uuid4().hex[:12],
            title,
            utc_text(request.start_at),
            request.timezone,
            json.dumps(rule, sort_keys=True) if rule else None,
            request.reminder_minutes,
            idempotency_key,
            utc_text(self._clock.now()),
        )

        def work(conn: sqlite3.Connection) -> tuple[ScheduleEntry, bool]:
            with self._tx(conn):
                cur = conn.execute(
                    "INSERT INTO entries (id, title, start_at, timezone, recurrence, reminder_minutes,"
                    " idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT(idempotency_key) DO NOTHING",
                    row_values,
                )
                created = cur.rowcount == 1
                row = conn.execute("SELECT * FROM entries WHERE idempotency_key = ?", (idempotency_key,)).fetchone()
            return self._entry(row), created

        return await self._run(work)

    async def list(self, *, include_inactive: bool = False) -> Sequence[ScheduleEntry]:
        """Entries by start time; only active ones unless include_inactive."""
        sql = "SELECT * FROM entries" + ("" if include_inactive else " WHERE status = 'active'")
        sql += " ORDER BY start_at, created_at, id"
        rows = await self._run(lambda conn: conn.execute(sql).fetchall())
        return [self._entry(r) for r in rows]

    async def get(self, entry_id: str) -> ScheduleEntry | None:
        """One entry by id, whatever its status."""
        row = await self._run(lambda conn: conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone())
        return self._entry(row) if row else None

    async def cancel(self, entry_id: str) -> bool:
        """Cancel an active entry; False if it does not exist or is not active."""

        def work(conn: sqlite3.Connection) -> bool:
            with self._tx(conn):
                cur = conn.execute(
                    "UPDATE entries SET status = 'cancelled' WHERE id = ? AND status = 'active'", (entry_id,)
                )
            return cur.rowcount == 1

        return await self._run(work)

    # -- ReminderStore ----------------------------------------------------------------------------------------------

    def _active_with_last_fired(self, conn: sqlite3.Connection) -> builtins.list[tuple[ScheduleEntry, datetime | None]]:
        rows = conn.execute(
            "SELECT e.*, (SELECT MAX(f.occurrence_at) FROM fired f WHERE f.entry_id = e.id) AS last_fired"
            " FROM entries e WHERE e.status = 'active' ORDER BY e.start_at, e.id"
        ).fetchall()
        return [(self._entry(r), parse_utc(r["last_fired"]) if r["last_fired"] else None) for r in rows]

    async def due_occurrences(self, until: datetime) -> Sequence[DueOccurrence]:
        """Per active entry, the latest occurrence with reminder time <= until that is newer than any fired one."""
        return recurrence.due_occurrences(await self._run(self._active_with_last_fired), until)

    async def next_reminder_at(self, after: datetime) -> datetime | None:
        """The earliest reminder time strictly after `after` over active entries, or None."""
        pairs = await self._run(self._active_with_last_fired)
        return recurrence.next_reminder_at((entry for entry, _ in pairs), after)

    async def mark_fired(self, entry_id: str, occurrence_at: datetime, outcome: Outcome) -> bool:
        """Record an occurrence as spoken or missed; False if it was already recorded. A one-off entry becomes done."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}")
        values = (entry_id, utc_text(occurrence_at), outcome, utc_text(self._clock.now()))

        def work(conn: sqlite3.Connection) -> bool:
            with self._tx(conn):
                row = conn.execute("SELECT recurrence FROM entries WHERE id = ?", (entry_id,)).fetchone()
                if row is None:
                    raise KeyError(f"no schedule {entry_id!r}")
                cur = conn.execute(
                    "INSERT INTO fired (entry_id, occurrence_at, outcome, fired_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT(entry_id, occurrence_at) DO NOTHING",
                    values,
                )
                if row["recurrence"] is None:
                    conn.execute("UPDATE entries SET status = 'done' WHERE id = ? AND status = 'active'", (entry_id,))
            return cur.rowcount == 1

        return await self._run(work)

    async def fired(self, entry_id: str | None = None) -> Sequence[FiredRecord]:
        """Handled occurrences (spoken or missed), oldest first; all entries unless `entry_id`."""

        def work(conn: sqlite3.Connection) -> builtins.list[sqlite3.Row]:
            if entry_id is None:
                return conn.execute("SELECT * FROM fired ORDER BY occurrence_at, entry_id").fetchall()
            return conn.execute(
                "SELECT * FROM fired WHERE entry_id = ? ORDER BY occurrence_at", (entry_id,)
            ).fetchall()

        return [
            FiredRecord(r["entry_id"], parse_utc(r["occurrence_at"]), r["outcome"], parse_utc(r["fired_at"]))
            for r in await self._run(work)
        ]


def entry_as_json(entry: ScheduleEntry, *, now: datetime | None = None) -> Mapping[str, Any]:
    """The `schedules list --json` form of an entry: the port's as_dict plus the next reminder time after `now`."""
    data = entry.as_dict()
    data["next_reminder_at"] = None
    if now is not None and entry.status == "active":
        try:
            occ = next_occurrence(
                entry.start_at, entry.timezone, entry.recurrence, now, reminder_minutes=entry.reminder_minutes
            )
        except RecurrenceError:
            occ = None
        if occ is not None:
            data["next_reminder_at"] = reminder_time(occ, entry.reminder_minutes).astimezone(occ.tzinfo).isoformat()
    return data
