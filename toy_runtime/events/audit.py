"""Structured audit records with secrets redacted: the port, a JSONL file sink and an in-memory sink."""

from __future__ import annotations

import json
import os
import re
import threading
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


class JsonlAudit:
    """Appends one JSON object per line to a file; safe to call from several threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8", buffering=1)

    def record(self, kind: str, **fields: Any) -> None:
        line = json.dumps(redact({"kind": kind, "ts": time.time(), **fields}), ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


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
