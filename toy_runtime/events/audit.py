"""Structured audit records with secrets redacted: the port, a JSONL file sink and an in-memory sink.

The JSONL file holds the child's words, so it is private (0600; its folder 0700 when we create it) and bounded:
`logging.handlers.RotatingFileHandler` rolls it over *between* records (`audit.jsonl` → `.1` … `.N`, oldest dropped).
A reader that has the file open keeps reading the renamed file whole; `audit_files()` lists the set oldest first.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping, Protocol

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


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose files are created 0600 (whatever the umask) and whose write errors reach the
    caller instead of being printed as a "--- Logging error ---" traceback."""

    def _open(self):  # type: ignore[no-untyped-def] - called for the first file and after every rollover
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a log an older version left world-readable is tightened too
        except PermissionError:  # not our file (we may still append to it)
            pass
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def handleError(self, record: logging.LogRecord) -> None:
        raise  # noqa: PLE0704 - re-raise what emit() caught: the caller decides (as with a plain write)


class JsonlAudit:
    """Appends one JSON object per line to a private file, rotated at about `max_bytes` (0 = never) keeping
    `backup_count` older files; safe to call from several threads (the handler's lock)."""

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 backup_count: int = DEFAULT_BACKUP_COUNT) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._handler = _PrivateRotatingFile(self.path, maxBytes=max(0, max_bytes), backupCount=max(1, backup_count),
                                             encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def record(self, kind: str, **fields: Any) -> None:
        line = json.dumps(redact({"kind": kind, "ts": time.time(), **fields}), ensure_ascii=False, default=str)
        # one emit per record: the size check, the rollover and the write happen under the handler's lock
        self._handler.handle(logging.makeLogRecord({"msg": line, "args": None}))

    def close(self) -> None:
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
