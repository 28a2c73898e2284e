"""The audit file holds the child's words: private whatever the umask, size-capped by rotation between whole records,
and `toy-runtime report` finds it without being told where it is."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from toy_runtime.audit import JsonlAudit
from toy_runtime.audit.sink import audit_files
from toy_runtime.metrics.turns import load_audit, open_audit_files, parse_audit_lines


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The usual interactive umask (files 0644), as outside systemd."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def completed(n: int, text: str = "") -> dict:
    """A `turn.completed` record's fields; `n` orders them."""
    return {"turn_id": f"t{n}", "n": n, "text": text, "first_speech_ms": 400.0, "total_ms": 900.0,
            "first_answer": {"ttft_ms": 300.0}, "events": []}


def records(path: Path) -> list[dict]:
    """Every record in the log and its backups, oldest first; fails on a line that is not whole JSON."""
    out = []
    for name in audit_files(path):
        for line in name.read_text(encoding="utf-8").splitlines():
            out.append(json.loads(line))
    return out


def test_created_private_with_a_private_folder(tmp_path: Path, loose_umask: None):
    path = tmp_path / "state" / "deep" / "audit.jsonl"
    audit = JsonlAudit(path)
    audit.record("turn.started", text="my secret is I like frogs")
    audit.close()
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700  # we created it


def test_an_existing_world_readable_log_is_tightened_and_an_existing_folder_left_alone(tmp_path: Path,
                                                                                        loose_umask: None):
    path = tmp_path / "audit.jsonl"
    path.write_text('{"kind": "old", "ts": 1}\n')
    path.chmod(0o644)
    folder_mode = mode(tmp_path)
    audit = JsonlAudit(path)
    audit.record("new")
    audit.close()
    assert mode(path) == 0o600 and mode(tmp_path) == folder_mode
    assert [r["kind"] for r in records(path)] == ["old", "new"]


def test_rotation_keeps_records_whole_bounded_and_private(tmp_path: Path, loose_umask: None):
    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=2_000, backup_count=2)
    for n in range(300):
        audit.record("turn.completed", **completed(n, "x" * (n % 37)))
    audit.close()
    files = audit_files(path)
    assert [f.name for f in files] == ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"]
    assert not (tmp_path / "audit.jsonl.3").exists()  # the oldest was dropped
    for f in files:
        assert mode(f) == 0o600
        assert f.stat().st_size <= 2_000
        assert f.read_bytes().endswith(b"\n")
    kept = [r["n"] for r in records(path)]  # every line whole JSON, in order, the newest kept without a gap
    assert kept == list(range(300 - len(kept), 300)) and len(kept) > 20


def test_a_record_with_non_ascii_words_is_never_split(tmp_path: Path):
    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=600, backup_count=50)
    for n in range(80):
        audit.record("turn.started", n=n, text="une grenouille verte 🐸 " * (n % 5))
    audit.close()
    assert [r["n"] for r in records(path)] == list(range(80))


def test_threads_writing_through_rollovers_lose_and_split_nothing(tmp_path: Path):
    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=4_000, backup_count=100)

    def write(worker: int) -> None:
        for n in range(200):
            audit.record("turn.started", worker=worker, n=n)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    audit.close()
    seen = records(path)
    assert len(seen) == 800 and len(audit_files(path)) > 5
    for worker in range(4):
        assert [r["n"] for r in seen if r["worker"] == worker] == list(range(200))


def test_files_opened_by_the_reader_are_read_whole_through_a_rollover(tmp_path: Path):
    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=1_500, backup_count=3)
    for n in range(30):
        audit.record("turn.completed", **completed(n))
    files = open_audit_files(path)  # the reader holds them ...
    try:
        for n in range(30, 60):  # ... while the runtime rotates several times
            audit.record("turn.completed", **completed(n))
        scan = parse_audit_lines((line for f in files for line in f), source=str(path))
    finally:
        for f in files:
            f.close()
        audit.close()
    ids = [t.turn_id for t in scan.turns]
    assert scan.malformed == 0 and len(ids) == len(set(ids))
    # what existed when opened (the live file also gets what was appended before its rollover), in order, once
    first = int(ids[0][1:])
    assert ids == [f"t{n}" for n in range(first, first + len(ids))] and "t29" in ids and len(ids) < 60


def test_the_moment_inside_a_rollover_when_only_backups_exist_is_readable(tmp_path: Path):
    """Between renaming `audit.jsonl` to `.1` and opening the new one, the live name does not exist."""
    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=1_000, backup_count=3)
    for n in range(12):
        audit.record("turn.completed", **completed(n))
    audit.close()
    live = {json.loads(line)["turn_id"] for line in path.read_text().splitlines()}
    backups = [r["turn_id"] for r in records(path) if r["turn_id"] not in live]
    path.rename(tmp_path / "elsewhere.jsonl")  # the live name is gone for a moment
    assert backups and [t.turn_id for t in load_audit(path).turns] == backups


def test_report_reading_while_the_runtime_rotates_never_reads_a_record_twice(tmp_path: Path):
    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=3_000, backup_count=4)
    audit.record("turn.completed", **completed(0))
    done = threading.Event()

    def write() -> None:
        n = 1
        while not done.is_set():
            audit.record("turn.completed", **completed(n))
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(50):
            scan = load_audit(path)
            ids = [t.turn_id for t in scan.turns]
            assert ids and len(ids) == len(set(ids))
            assert scan.malformed <= 1  # at most the record being written at that instant
    finally:
        done.set()
        writer.join()
        audit.close()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    env["TOY_STATE_DIR"] = str(tmp_path)
    return env


def test_report_without_an_argument_reads_the_configured_log_and_its_backups(tmp_path: Path):
    audit = JsonlAudit(tmp_path / "audit.jsonl", max_bytes=1_000, backup_count=5)
    for n in range(12):
        audit.record("turn.completed", **completed(n))
    audit.close()
    assert len(audit_files(tmp_path / "audit.jsonl")) > 1
    proc = subprocess.run([sys.executable, "-m", "toy_runtime", "report"], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "12 turn(s)" in proc.stdout and str(tmp_path / "audit.jsonl") in proc.stdout


def test_report_without_an_argument_and_no_log_is_one_line_exit_2(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "toy_runtime", "report"], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert str(tmp_path / "audit.jsonl") in proc.stderr and "Traceback" not in proc.stderr


def test_the_runtime_writes_its_audit_log_private_and_rotating(tmp_path: Path, loose_umask: None):
    """`chat` (outside systemd, umask 022) with a tiny cap: the log and its backups are 0600."""
    env = _env(tmp_path / "state")
    env.update(TOY_AUDIT__MAX_BYTES="3000", TOY_AUDIT__BACKUP_COUNT="2")
    proc = subprocess.run([sys.executable, "-m", "toy_runtime", "chat", "--json"], input="hello\n" * 6,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "state" / "audit.jsonl"
    files = audit_files(path)
    assert len(files) >= 2 and all(mode(f) == 0o600 for f in files)
    assert mode(path.parent) == 0o700
    assert all(f.stat().st_size <= 3_000 for f in files)
    records(path)  # every line whole JSON
