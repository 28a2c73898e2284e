"""The idempotency results store on SQLite (stdlib sqlite3): a redelivered command is recognised after a restart.

One table, key → stored result (`events.idempotency.result_to_json`) and the wall-clock second it was stored. WAL with
synchronous=FULL, and `put()` returns only after COMMIT: an answered command's record survives a power cut, so its
redelivery is answered from the record instead of running again. Bounded: rows older than the TTL are never returned
and are deleted on the next write, and the oldest rows beyond `max_rows` go with them.

Faults at start (not a database, damaged, newer schema) raise `IdempotencyStoreError` for the composition root to turn
into one line naming the setting. Faults at run time (disk full, file gone read-only) must not fail a turn: the store
logs one warning and goes on in memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, TypeVar

from ..errors import ToyError
from ..events.idempotency import MemoryResultStore, result_from_json, result_to_json
from ..events.model import EventResult

log = logging.getLogger(__name__)
T = TypeVar("T")

# Migration N brings the schema from version N-1 to N. Append, never edit a released step.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE results (
            key       TEXT PRIMARY KEY,
            stored_at REAL NOT NULL,                 -- seconds since the epoch
            result    TEXT NOT NULL                  -- result_to_json(), version inside
        )""",
        "CREATE INDEX results_stored_at ON results(stored_at)",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)
# A stored result above this stays in memory only: a row cap alone would still let 10000 large answers (a search's
# text) take hundreds of MB of a small SD card. Command results are a few hundred bytes.
MAX_ROW_BYTES = 64 * 1024


class IdempotencyStoreError(ToyError, RuntimeError):
    """The file cannot serve as the idempotency store (not SQLite, damaged, newer schema, cannot be opened)."""

    code = "idempotency_store_unusable"


class SqliteResultStore:
    """`ResultStore` on one SQLite file; the work runs in a worker thread on one lock-guarded connection."""

    def __init__(self, path: str | os.PathLike[str], *, max_rows: int = 10000, ttl_s: float = 86400.0,
                 clock: Callable[[], float] = time.time, busy_timeout_ms: int = 5000) -> None:
        if max_rows < 1 or ttl_s <= 0:
            raise ValueError("max_rows must be ≥ 1 and ttl_s > 0")
        self.path = Path(path)
        self.max_rows = max_rows
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._memory: MemoryResultStore | None = None  # set once the file failed at run time
        self._oversize = MemoryResultStore(max_rows=64, ttl_s=ttl_s, clock=clock)  # rows above MAX_ROW_BYTES
        try:
            if str(path) != ":memory:":
                # private: the state dir holds the audit log too (as JsonlAudit makes it)
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a commit is exactly where we say it is.
            self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                                         timeout=busy_timeout_ms / 1000)
        except (OSError, sqlite3.Error) as exc:
            raise IdempotencyStoreError(f"{path} cannot be opened: {exc}") from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms):d}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._migrate()
            # a damaged page shows only when read: look at every page once at start, not in the middle of a turn
            check = self._conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise IdempotencyStoreError(f"{path} is damaged ({check})")
        except sqlite3.Error as exc:
            self._conn.close()
            raise IdempotencyStoreError(f"{path} is not a usable SQLite database ({exc})") from None
        except BaseException:
            self._conn.close()
            raise

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise IdempotencyStoreError(f"{self.path} has schema v{version}, newer than this toy-runtime supports "
                                        f"(v{SCHEMA_VERSION})")
        for target in range(version + 1, SCHEMA_VERSION + 1):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self._conn.execute("PRAGMA user_version").fetchone()[0] < target:  # another process may have
                    for statement in _MIGRATIONS[target - 1]:
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {target:d}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @property
    def degraded(self) -> bool:
        """True once a run-time fault moved the store to memory."""
        return self._memory is not None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._conn)

        # A cancelled caller does not abort the thread: a started write commits or rolls back as a unit.
        return await asyncio.to_thread(locked)

    def _degrade(self, exc: BaseException) -> MemoryResultStore:
        if self._memory is None:  # one warning, however many writes fail afterwards
            log.warning("events.idempotency_path: %s failed (%s); remembering results in memory until restart",
                        self.path, exc)
            self._memory = MemoryResultStore(max_rows=self.max_rows, ttl_s=self.ttl_s, clock=self._clock)
        return self._memory

    async def get(self, key: str) -> EventResult | None:
        for memory in (self._oversize, self._memory):
            if memory is not None and (result := memory.get_now(key)) is not None:
                return result
        cutoff = self._clock() - self.ttl_s

        def work(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT result FROM results WHERE key = ? AND stored_at > ?", (key, cutoff)).fetchone()
            return row[0] if row else None

        try:
            text = await self._run(work)
        except sqlite3.Error as exc:
            self._degrade(exc)
            return None
        if text is None:
            return None
        try:
            return result_from_json(text)
        except ValueError:  # a foreign or damaged row: treat as unknown rather than fail the turn
            log.warning("idempotency store %s: unreadable row for key %s ignored", self.path, key)
            return None

    async def put(self, key: str, result: EventResult) -> None:
        if self._memory is not None:
            self._memory.put_now(key, result)
            return
        now, text = self._clock(), result_to_json(result)
        if len(text.encode()) > MAX_ROW_BYTES:
            self._oversize.put_now(key, result)
            return

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("INSERT OR REPLACE INTO results (key, stored_at, result) VALUES (?, ?, ?)",
                             (key, now, text))
                conn.execute("DELETE FROM results WHERE stored_at <= ?", (now - self.ttl_s,))
                conn.execute("DELETE FROM results WHERE key IN (SELECT key FROM results ORDER BY stored_at DESC "
                             "LIMIT -1 OFFSET ?)", (self.max_rows,))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        try:
            await self._run(work)
        except sqlite3.Error as exc:
            self._degrade(exc).put_now(key, result)

    async def count(self) -> int:
        """Rows in the file (expired ones included until the next write): for tests and diagnostics."""
        return await self._run(lambda conn: conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
