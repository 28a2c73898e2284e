"""Issue 34 §1: what a hostile neighbour's floods cost. Malformed requests write one short line each within a
budget (no tracebacks, none of their bytes); refused requests are recorded in full only for the first few per peer
and window, the rest summarised, so the real records stay in the audit however long the flood runs."""

from __future__ import annotations

import asyncio
import re
import subprocess

import pytest

from toy_runtime.audit import AuditKind, JsonlAudit
from toy_runtime.audit.sink import audit_files
from toy_runtime.testing.services import audit_records, wait_for

from .conftest import free_port, runtime_env, start

aiohttp = pytest.importorskip("aiohttp")

MALFORMED = [  # what the issue sent: bad Content-Length, NUL in the path, unknown method, HTTP/9.9, broken chunking
    "POST /api/end HTTP/1.1\r\nHost: {h}\r\nContent-Length: abc\r\n\r\n",
    "GET /a\x00b HTTP/1.1\r\nHost: {h}\r\n\r\n",
    "FO\x01O / HTTP/1.1\r\nHost: {h}\r\n\r\n",
    "GET / HTTP/9.9\r\nHost: {h}\r\n\r\n",
    "POST /api/end HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
    "zz\r\nhello\r\n0\r\n\r\n",
]


async def _send_malformed(port: int, count: int) -> list[str]:
    statuses = []
    for n in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(MALFORMED[n % len(MALFORMED)].format(h=f"127.0.0.1:{port}").encode("latin-1"))
        statuses.append((await asyncio.wait_for(reader.readline(), 10)).decode())
        writer.close()
    return statuses


def test_a_hundred_malformed_requests_write_a_few_short_lines_and_say_how_many_were_held(tmp_path):
    port = free_port()
    proc = start(["chat", "--web", f"127.0.0.1:{port}"], runtime_env(tmp_path), stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: audit_records(tmp_path / "audit.jsonl", "console.started"), 60, "the console", proc)
        statuses = asyncio.run(_send_malformed(port, 100))
        assert all(s.startswith("HTTP/1.0 400") or s.startswith("HTTP/1.1 400") for s in statuses), set(statuses)
        out, err = proc.communicate("", timeout=60)  # end of input ends `chat`, which closes the console
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "\\x00" not in err and "zz" not in err and "abc" not in err, err
    lines = err.splitlines()
    assert len(lines) <= 10, err  # 901 lines before
    written = [line for line in lines if "malformed request from 127.0.0.1 refused" in line]
    assert 1 <= len(written) <= 10, err
    held = sum(int(n) for n in re.findall(r"(\d+) more (?:such )?lines", err))
    # nothing happens silently: each bad request is a line or counted, except a bad method as a connection's first
    # request, which aiohttp itself logs at debug level only (non-HTTP traffic on the port)
    assert len(written) + held == 80, err


def test_a_refusal_flood_is_summarised_and_the_real_records_stay(tmp_path):
    asyncio.run(_refusal_flood(tmp_path))


async def _refusal_flood(tmp_path):
    from toy_runtime.web.hub import ConsoleHub
    from toy_runtime.web.server import ConsoleServer

    path = tmp_path / "audit.jsonl"
    audit = JsonlAudit(path, max_bytes=100_000, backup_count=1)  # 2,000 refusals in full (~350 KB) rotate it twice
    for n in range(50):
        audit.record(AuditKind.TURN_COMPLETED, turn_id=f"t{n}", user_text=f"real turn {n}")
    server = ConsoleServer(ConsoleHub(), None, audit, host="127.0.0.1", port=0, token="a-real-token-0123456789",
                           loopback=True)
    await server.start()
    floods = {"127.0.0.1": 1500, "127.0.0.2": 500}  # two peers: all of 127/8 is loopback on Linux
    try:
        for peer, count in floods.items():
            connector = aiohttp.TCPConnector(local_addr=(peer, 0), limit=4)
            async with aiohttp.ClientSession(connector=connector) as session:
                async def refused(n: int) -> int:
                    url = f"http://127.0.0.1:{server.port}/" + ("events" if n % 2 else "?token=guess")
                    async with session.get(url) as response:
                        return response.status
                statuses = await asyncio.gather(*(refused(n) for n in range(count)))
            assert set(statuses) == {401}
    finally:
        await server.aclose()
        audit.close()
    records = [r for f in audit_files(path) for r in audit_records(f)]
    assert [r["user_text"] for r in records if r["kind"] == "turn.completed"] == [f"real turn {n}" for n in range(50)]
    from toy_runtime.web.refusals import FULL_PER_PEER

    full = [r for r in records if r["kind"] == "console.refused"]
    summaries = [r for r in records if r["kind"] == "console.refused_summary"]
    assert len(full) + len(summaries) <= 2 * (2 * FULL_PER_PEER + 2)  # at most two windows on a slow machine
    for peer, count in floods.items():
        mine = [r for r in summaries if r["peer"] == peer]
        assert 1 <= len(mine) <= 2
        assert sum(r["refused"] for r in mine) + sum(r["peer"] == peer for r in full) == count
        assert set().union(*(r["reasons"] for r in mine)) == {"wrong token",
                                                              "token required: open the console at /?token=…"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_ledger_caps_full_records_and_peers_and_slows_down_while_a_flood_goes_on():
    from toy_runtime.audit import MemoryAudit
    from toy_runtime.web.refusals import FULL_PER_WINDOW, OTHER_PEERS, SUMMARY_PEERS, RefusalLedger

    audit, clock = MemoryAudit(), Clock()
    ledger = RefusalLedger(audit, window_s=60, clock=clock)
    for n in range(100):  # many addresses: each gets a few in full until the window's cap
        for _ in range(10):
            ledger.refused(peer=f"10.0.0.{n}", reason="wrong token")
    assert len(audit.of("console.refused")) == FULL_PER_WINDOW
    clock.now = 61
    ledger.tick()
    summaries = audit.of("console.refused_summary")
    assert len(summaries) == SUMMARY_PEERS + 1 and summaries[-1]["peer"] == OTHER_PEERS
    assert sum(r["refused"] for r in summaries) == 1000 - FULL_PER_WINDOW
    assert ledger.window_s == 120  # the flood went on: the next window is longer
    ledger.refused(peer="10.0.0.1", reason="wrong token")  # a new window: a few in full again
    assert len(audit.of("console.refused")) == FULL_PER_WINDOW + 1
    clock.now = 61 + 120
    ledger.tick()
    assert ledger.window_s == 60  # a quiet window brings the short one back
    assert len(audit.of("console.refused_summary")) == SUMMARY_PEERS + 1
