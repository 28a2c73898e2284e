"""The JSONL audit on a real full disk (a 1 MB tmpfs, root only): no write error reaches the caller, records wait in
memory (bounded) and are written in order when space returns, a half-written line never stays in the file."""

from __future__ import annotations

import json
import logging

from toy_runtime.audit import sink as audit_module
from toy_runtime.audit import AuditKind, JsonlAudit


def lines_of(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_records_wait_in_memory_while_the_disk_is_full_and_are_written_when_it_frees(small_disk, caplog):
    path = small_disk.path / "audit.jsonl"
    audit = JsonlAudit(path)
    audit.record("turn.started", text="before")
    small_disk.fill()
    with caplog.at_level(logging.WARNING, logger="toy_runtime.audit"):
        for n in range(5):
            # more than a page: a short write, cut back off the file
            audit.record("turn.started", text=f"while full {n}", padding="x" * 5000)
        assert audit.pending == 5 and audit.write_failures == 5
        assert [r.message for r in caplog.records if "cannot write" in r.message] == [caplog.records[0].message]
        assert [r["text"] for r in lines_of(path)] == ["before"]  # nothing half-written after the first record
        small_disk.free()
        audit.record("turn.started", text="after")
    audit.close()
    assert [r["text"] for r in lines_of(path)] == ["before"] + [f"while full {n}" for n in range(5)] + ["after"]
    assert audit.pending == 0 and audit.dropped == 0
    assert sum("writing to" in r.message for r in caplog.records) == 1


def test_past_the_bound_the_oldest_waiting_records_go_and_a_gap_record_says_so(small_disk, monkeypatch):
    monkeypatch.setattr(audit_module, "PENDING_MAX_BYTES", 3000)
    path = small_disk.path / "audit.jsonl"
    audit = JsonlAudit(path)
    small_disk.fill()
    for n in range(10):
        audit.record("turn.started", text=f"record {n}", padding="x" * 900)
    assert audit.dropped > 0 and audit.pending == 10 - audit.dropped
    kept_from = audit.dropped
    small_disk.free()
    audit.record("turn.started", text="after")
    audit.close()
    records = lines_of(path)
    assert [r.get("text") for r in records[:-1]] == [f"record {n}" for n in range(kept_from, 10)] + ["after"]
    gap = records[-1]
    assert gap["kind"] == AuditKind.AUDIT_GAP and gap["dropped"] == kept_from
    assert gap["before_ts"] == records[0]["ts"]



def test_records_still_waiting_at_close_are_counted_in_one_warning(small_disk, caplog):
    audit = JsonlAudit(small_disk.path / "audit.jsonl")
    small_disk.fill()
    for n in range(3):
        audit.record("turn.started", text=f"while full {n}", padding="x" * 5000)
    with caplog.at_level(logging.WARNING, logger="toy_runtime.audit"):
        audit.close()
    assert [r.message for r in caplog.records if "lost" in r.message] == \
        [f"audit: 3 records could not be written to {small_disk.path / 'audit.jsonl'} and are lost"]
