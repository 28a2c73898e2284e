"""The audit log on its own floor: the record kinds of every layer (`kinds.py`, one enum grouped by layer), the sink
port with its JSONL writer, in-memory and null sinks, and the redaction of secrets (`sink.py`).

Every layer writes audit records, the event kernel included, so this floor sits below them all and imports nothing
of the package but the error base: the kernel's own kinds are one group among the others, not the home of them all.
"""

from .kinds import AuditKind
from .sink import AuditSink, JsonlAudit, MemoryAudit, NullAudit, TeeAudit, audit_files, redact

__all__ = ["AuditKind", "AuditSink", "JsonlAudit", "MemoryAudit", "NullAudit", "TeeAudit", "audit_files", "redact"]
