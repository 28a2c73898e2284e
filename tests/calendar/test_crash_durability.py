"""kill -9 of a writer mid-stream, then restart: no duplicate, nothing acknowledged lost.

The child creates entries with keys k<start>, k<start+1>, ... and prints each key only after create() returned
(the acknowledgement). The parent SIGKILLs it after a few acks, reopens the file, and replays create() for every
acknowledged key plus the next one — as a retransmitting client would.
"""

from __future__ import annotations

import pytest
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from toy_runtime.adapters.sqlite_calendar import SqliteCalendarStore
from toy_runtime.ports.calendar import ScheduleRequest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import datetime, timezone
    sys.path.insert(0, sys.argv[3])
    from toy_runtime.adapters.sqlite_calendar import SqliteCalendarStore
    from toy_runtime.ports.calendar import ScheduleRequest

    async def main():
        store = SqliteCalendarStore(sys.argv[1])
        i = int(sys.argv[2])
        while True:
            key = f"k{i}"
            request = ScheduleRequest(title=f"entry {i}", start_at=datetime(2026, 6, 1, 7, tzinfo=timezone.utc),
                                      timezone="Europe/Berlin", recurrence={"frequency": "daily"})
            await store.create(request, key)
            sys.stdout.write(key + "\\n")
            sys.stdout.flush()
            i += 1

    asyncio.run(main())
    """
)


def request_for(i: int) -> ScheduleRequest:
    from datetime import datetime, timezone

    return ScheduleRequest(
        title=f"entry {i}",
        start_at=datetime(2026, 6, 1, 7, tzinfo=timezone.utc),
        timezone="Europe/Berlin",
        recurrence={"frequency": "daily"},
    )


def run_child_until_killed(db: Path, script: Path, start: int, acks_before_kill: int) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), str(start), str(ROOT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []
    try:
        assert proc.stdout is not None
        while len(acked) < acks_before_kill:
            line = proc.stdout.readline()
            assert line, f"child died early: {proc.stderr.read() if proc.stderr else ''}"
            acked.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)  # most likely inside the next create(): mid-transaction or mid-fsync
        proc.wait(timeout=10)
        acked.extend(line.strip() for line in proc.stdout.read().splitlines() if line.strip())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return acked


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_sigkill_mid_write_then_restart(tmp_path):
    db = tmp_path / "calendar.db"
    script = tmp_path / "writer.py"
    script.write_text(CHILD)
    all_acked: list[str] = []
    replayed: set[str] = set()
    next_index = 0
    for round_no in range(3):
        acked = run_child_until_killed(db, script, next_index, acks_before_kill=5 + 7 * round_no)
        assert acked[0] == f"k{next_index}"
        all_acked.extend(acked)
        last = int(acked[-1][1:])

        store = SqliteCalendarStore(db)  # restart: recovery of the WAL happens here
        try:
            for key in all_acked:
                entry, created = await store.create(request_for(int(key[1:])), key)
                assert not created, f"acknowledged {key} was lost"
                assert entry.idempotency_key == key
            # The in-flight one may or may not have committed; replaying it must not duplicate either way.
            pending = f"k{last + 1}"
            replayed.add(pending)
            await store.create(request_for(last + 1), pending)
            await store.create(request_for(last + 1), pending)
        finally:
            await store.aclose()

        with sqlite3.connect(db) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            keys = [k for (k,) in raw.execute("SELECT idempotency_key FROM entries")]
        assert len(keys) == len(set(keys)), "duplicate idempotency key rows"
        assert set(all_acked) | replayed == set(keys)
        next_index = last + 2
