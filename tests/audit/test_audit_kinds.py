"""The audit log's kinds are one enum: every record the package writes names an `AuditKind`, and every kind says
what it records. The log is the contract `report`, the console and the tests read, so a stray string is a drift."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

from toy_runtime.audit import AuditKind, JsonlAudit, MemoryAudit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("toy_runtime", "firmware_bridge")


@functools.cache  # one parse of the package for both tests
def record_calls() -> tuple[tuple[str, int, ast.Call], ...]:
    """Every `<something>.record(...)` call in the shipped packages."""
    calls = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record":
                    calls.append((str(path.relative_to(ROOT)), node.lineno, node))
    return tuple(calls)


def names_a_kind(call: ast.Call) -> bool:
    first = call.args[0] if call.args else None
    return (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "AuditKind"
            and first.attr in AuditKind.__members__)


def forwards_its_kind(path: str, call: ast.Call) -> bool:
    # the one sink that passes on what it was given (TeeAudit): its `kind` parameter, not a new kind
    first = call.args[0] if call.args else None
    return path.endswith("audit/sink.py") and isinstance(first, ast.Name) and first.id == "kind"


def test_every_record_call_names_an_audit_kind() -> None:
    calls = record_calls()
    assert len(calls) > 40  # the scan sees the package (a wrong root would pass vacuously)
    stray = [f"{path}:{line}: {ast.unparse(call)[:80]}" for path, line, call in calls
             if not names_a_kind(call) and not forwards_its_kind(path, call)]
    assert stray == []


def test_every_kind_is_used_and_described() -> None:
    used = {call.args[0].attr for _, _, call in record_calls() if names_a_kind(call)}
    assert set(AuditKind.__members__) - used == set()  # a kind nothing records is a stale line in the contract
    for kind in AuditKind:
        assert len(kind.description.split()) >= 3, kind.name
    assert len({k.value for k in AuditKind}) == len(AuditKind)


@pytest.mark.parametrize("kind", [AuditKind.TURN_STARTED, AuditKind.VOICE_TURN])
def test_a_kind_is_written_as_its_plain_dotted_name(tmp_path: Path, kind: AuditKind) -> None:
    file_sink, memory = JsonlAudit(tmp_path / "audit.jsonl"), MemoryAudit()
    for sink in (file_sink, memory):
        sink.record(kind, turn_id="t1")
    file_sink.close()
    line = json.loads((tmp_path / "audit.jsonl").read_text(encoding="utf-8"))
    assert line["kind"] == kind.value and "." in kind.value
    assert memory.of(kind.value) == memory.records and type(memory.records[0]["kind"]) is str
