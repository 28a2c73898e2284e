"""Structured audit records with secrets redacted: the port, a JSONL file sink and an in-memory sink.

The JSONL file holds the child's words, so it is private (0600; its folder 0700 when we create it) and bounded:
`logging.handlers.RotatingFileHandler` rolls it over *between* records (`audit.jsonl` → `.1` … `.N`, oldest dropped).
A reader that has the file open keeps reading the renamed file whole; `audit_files()` lists the set oldest first.

A write that fails (a full disk, a read-only remount, an I/O error) never reaches the turn: each record is written
whole or not at all (a short write is cut back off the file), one warning is logged, and the records that could not
be written wait in memory, oldest first, up to `PENDING_MAX_BYTES` (past that the oldest go and are counted). Every
later record first retries the waiting ones, so when space returns they are written in order, followed by one
`audit.gap` record if any had to go (how many, and the time of the oldest record kept after them).
`JsonlAudit.write_failures` and `.dropped` count what happened.
"""

from __future__ import annotations

import io
import json
import logging
import logging.handlers
import os
import re
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Protocol

from .kinds import AuditKind

_SECRET_KEY = re.compile(r"(api[_-]?key|password|passwd|secret|token|authorization|credential)", re.I)
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._\-]{8,}")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
REDACTED = "***"


def redact(value: Any) -> Any:
    """Return a copy of `value` with secret-looking keys and tokens replaced by ***."""
    if isinstance(value, Mapping):
        return {
            # only text can be a secret: counts and timings such as `prompt_tokens` or `first_token` stay readable
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) and isinstance(v, str) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _SK.sub(REDACTED, _BEARER.sub(r"\1" + REDACTED, value))
    return value


class AuditSink(Protocol):
    """Where audit records go. `kind` is a stable dotted name such as `event.executed`."""

    def record(self, kind: str, **fields: Any) -> None: ...


class MemoryAudit:
    """Keeps records in a list; used by tests and the bench harness."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def record(self, kind: str, **fields: Any) -> None:
        self.records.append(redact({"kind": kind, "ts": time.time(), **fields}))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == kind]


DEFAULT_MAX_BYTES = 5_000_000  # ~1,900 spoken turns at ~2.6 KB each
DEFAULT_BACKUP_COUNT = 3
# What the audit keeps in memory while its disk refuses writes: ~380 spoken turns, a bounded cost on a small toy
PENDING_MAX_BYTES = 1_000_000

log = logging.getLogger("toy_runtime.audit")


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose files are created 0600 (whatever the umask) and whose write errors reach the
    caller instead of being printed as a "--- Logging error ---" traceback."""

    def _open(self) -> io.TextIOWrapper:  # called for the first file and after every rollover
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a log an older version left world-readable is tightened too
        except PermissionError:  # not our file (we may still append to it)
            pass
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def emit(self, record: logging.LogRecord) -> None:
        """Roll over when due, then append the line whole or not at all; OSError reaches the caller."""
        if self.shouldRollover(record):
            self.doRollover()
        if self.stream is None:
            self.stream = self._open()
        data = (self.format(record) + self.terminator).encode(self.encoding or "utf-8")
        # through the descriptor, never the text buffer: a failed write must leave nothing behind to be flushed later
        fd = self.stream.fileno()
        start = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            try:
                os.ftruncate(fd, start)  # a half line would be a broken record in front of the whole one later
            except OSError:
                pass
            raise


class JsonlAudit:
    """Appends one JSON object per line to a private file, rotated at about `max_bytes` (0 = never) keeping
    `backup_count` older files; safe to call from several threads (one lock around the waiting records and the
    write). A write the disk refuses is held in memory, not raised (module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 backup_count: int = DEFAULT_BACKUP_COUNT) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._handler = _PrivateRotatingFile(self.path, maxBytes=max(0, max_bytes), backupCount=max(1, backup_count),
                                             encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._lock = threading.RLock()  # re-entered once: the gap record after a recovery is a record too
        self._pending: deque[str] = deque()  # lines not written yet, oldest first
        self._pending_bytes = 0  # their length in characters (about bytes: the lines are mostly ASCII)
        self._gap = 0  # records dropped from `_pending` since the last gap record
        self._gap_before: float | None = None  # the time of the oldest record kept after the dropped ones
        self.write_failures = 0  # writes the disk refused
        self.dropped = 0  # records lost for good (the in-memory bound was reached)
        self._held = False  # records wait for the disk: one warning per spell, not one per record

    def record(self, kind: str, **fields: Any) -> None:
        line = json.dumps(redact({"kind": kind, "ts": time.time(), **fields}), ensure_ascii=False, default=str)
        with self._lock:
            self._pending.append(line)
            self._pending_bytes += len(line)
            self._write_pending()

    @property
    def pending(self) -> int:
        """Records waiting in memory for the disk to take them."""
        return len(self._pending)

    def _write_pending(self) -> None:
        while self._pending:
            try:
                self._emit(self._pending[0])
            except OSError as exc:
                self.write_failures += 1
                if not self._held:
                    log.warning("audit: cannot write %s (%s); keeping up to %d KB of records in memory until it can",
                                self.path, exc.strerror or exc, PENDING_MAX_BYTES // 1000)
                self._held = True
                self._bound()
                return
            self._pending_bytes -= len(self._pending.popleft())
        if self._held:
            self._held = False
            log.warning("audit: writing to %s again (%d records lost while it could not)", self.path, self._gap)
            if self._gap:
                dropped, before, self._gap = self._gap, self._gap_before, 0
                self.record(AuditKind.AUDIT_GAP, dropped=dropped, before_ts=before)

    def _bound(self) -> None:
        while self._pending_bytes > PENDING_MAX_BYTES and len(self._pending) > 1:
            self._pending_bytes -= len(self._pending.popleft())
            self._gap += 1
            self.dropped += 1
        if self._gap:
            self._gap_before = json.loads(self._pending[0]).get("ts")

    def _emit(self, line: str) -> None:
        # one emit per record: the size check, the rollover and the write happen under the handler's lock
        self._handler.handle(logging.makeLogRecord({"msg": line, "args": None}))

    def close(self) -> None:
        with self._lock:
            self._write_pending()  # a last try
            if self._pending:
                log.warning("audit: %d records could not be written to %s and are lost", len(self._pending),
                            self.path)
        self._handler.close()


def audit_files(path: str | os.PathLike[str]) -> list[Path]:
    """The audit log and its rotated backups that exist, oldest first (`audit.jsonl.N` … `.1`, `audit.jsonl`)."""
    path = Path(path)
    backups = []
    for candidate in path.parent.glob(f"{path.name}.*"):
        suffix = candidate.name[len(path.name) + 1:]
        if suffix.isdigit():
            backups.append((int(suffix), candidate))
    return [p for _, p in sorted(backups, reverse=True)] + ([path] if path.exists() else [])


class TeeAudit:
    """Sends each record to several sinks."""

    def __init__(self, *sinks: AuditSink) -> None:
        self.sinks = sinks

    def record(self, kind: str, **fields: Any) -> None:
        for sink in self.sinks:
            sink.record(kind, **fields)


class NullAudit:
    """Discards records."""

    def record(self, kind: str, **fields: Any) -> None:
        return None
