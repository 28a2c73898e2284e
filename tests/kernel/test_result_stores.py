"""The idempotency results port: one contract run on the in-memory store and on SQLite (a real file), plus what only
the durable one promises (a restart, a damaged file, a disk that fills at run time) and the key's arguments part
through the kernel on both."""

from __future__ import annotations

import logging

import pytest

from toy_runtime.adapters.sqlite_idempotency import MAX_ROW_BYTES, IdempotencyStoreError, SqliteResultStore
from toy_runtime.events import (
    EventBatch,
    EventKernel,
    EventRegistry,
    EventRequest,
    EventResult,
    EventStatus,
    EventTimings,
    IdempotencyStore,
    MemoryResultStore,
    ResolutionPath,
    ResultPolicy,
    SourceProtocol,
)

from .conftest import make_definition


class Clock:
    """Wall-clock seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def a_result(n: int, key: str = "k") -> EventResult:
    return EventResult(event_id=f"ev_{n}", name="test.alpha", status=EventStatus.SUCCEEDED,
                       policy=ResultPolicy.TEMPLATE_FOLLOW_UP, arguments={"n": n, "word": "grüße"},
                       resolution=ResolutionPath.DETERMINISTIC, result={"level": n, "nested": {"a": [1, 2]}},
                       question=None, missing=("x",), idempotency_key=key, fallback_used=True, fallback_tokens=7,
                       timings=EventTimings(resolve_ms=1.5, execute_ms=2.25))


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request, tmp_path):
    """`make_store(max_rows=, ttl_s=, clock=)` → a fresh store of the parametrized kind (closed at teardown)."""
    made: list[SqliteResultStore] = []

    def make(**kw):
        if request.param == "memory":
            return MemoryResultStore(**kw)
        store = SqliteResultStore(tmp_path / "idempotency.sqlite3", **kw)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


# -- the contract ---------------------------------------------------------------------------------------------------

async def test_a_stored_result_comes_back_equal(make_store):
    store = make_store(clock=Clock())
    await store.put("k1", a_result(3, "k1"))
    assert await store.get("k1") == a_result(3, "k1")
    assert await store.get("k2") is None


async def test_a_result_expires_after_its_ttl(make_store):
    clock = Clock()
    store = make_store(ttl_s=60, clock=clock)
    await store.put("k1", a_result(1))
    clock.now += 59
    assert await store.get("k1") is not None
    clock.now += 1
    assert await store.get("k1") is None


async def test_the_oldest_rows_beyond_the_cap_go(make_store):
    clock = Clock()
    store = make_store(max_rows=3, clock=clock)
    for n in range(5):
        await store.put(f"k{n}", a_result(n, f"k{n}"))
        clock.now += 1
    assert [await store.get(f"k{n}") is not None for n in range(5)] == [False, False, True, True, True]


# -- only the durable store -----------------------------------------------------------------------------------------

async def test_a_result_survives_reopening_the_file_and_expired_rows_are_deleted(tmp_path):
    clock, path = Clock(), tmp_path / "idem.sqlite3"
    first = SqliteResultStore(path, ttl_s=100, clock=clock)
    await first.put("old", a_result(1, "old"))
    clock.now += 50
    await first.put("k1", a_result(2, "k1"))
    first.close()
    again = SqliteResultStore(path, ttl_s=100, clock=clock)
    try:
        assert await again.get("k1") == a_result(2, "k1")
        clock.now += 60  # "old" is now past its TTL: the next write deletes it, so the file cannot grow forever
        await again.put("k2", a_result(3, "k2"))
        assert await again.count() == 2 and await again.get("old") is None
        assert (await again._run(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])) == "wal"
    finally:
        again.close()


def test_a_file_that_is_not_sqlite_or_is_damaged_is_refused_at_start(tmp_path):
    text = tmp_path / "notes.sqlite3"
    text.write_text("my shopping list\n" * 100)
    with pytest.raises(IdempotencyStoreError, match="notes.sqlite3"):
        SqliteResultStore(text)
    assert text.read_text() == "my shopping list\n" * 100  # untouched
    damaged = tmp_path / "damaged.sqlite3"
    SqliteResultStore(damaged).close()
    raw = bytearray(damaged.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)  # keep the magic, ruin the schema page
    damaged.write_bytes(bytes(raw))
    with pytest.raises(IdempotencyStoreError, match="damaged.sqlite3"):
        SqliteResultStore(damaged)


async def test_a_full_disk_at_run_time_degrades_to_memory_with_one_warning(tmp_path, caplog):
    store = SqliteResultStore(tmp_path / "idem.sqlite3")
    try:
        await store.put("k0", a_result(0, "k0"))
        # SQLite's own "database or disk is full" (SQLITE_FULL), the error a full disk gives: no page may be added
        pages = await store._run(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
        await store._run(lambda c: c.execute(f"PRAGMA max_page_count = {pages}"))
        big = EventResult(event_id="ev_big", name="test.alpha", status=EventStatus.SUCCEEDED,
                          policy=ResultPolicy.SILENT_SUCCESS, arguments={}, resolution=None,
                          result={"blob": "x" * 20000})
        with caplog.at_level(logging.WARNING, logger="toy_runtime.adapters.sqlite_idempotency"):
            for n in range(3):
                await store.put(f"big{n}", big)
        assert store.degraded
        assert await store.get("big2") == big and await store.get("k0") == a_result(0, "k0")
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "events.idempotency_path" in warnings[0].getMessage()
        assert "full" in warnings[0].getMessage()
    finally:
        store.close()


async def test_an_oversized_result_is_kept_in_memory_not_on_disk(tmp_path):
    store = SqliteResultStore(tmp_path / "idem.sqlite3")
    try:
        big = EventResult(event_id="ev_big", name="test.alpha", status=EventStatus.SUCCEEDED,
                          policy=ResultPolicy.SILENT_SUCCESS, arguments={}, resolution=None,
                          result={"text": "x" * (MAX_ROW_BYTES + 1)})
        await store.put("big", big)
        assert await store.get("big") == big and await store.count() == 0 and not store.degraded
    finally:
        store.close()


# -- through the kernel ---------------------------------------------------------------------------------------------

class Calls:
    """A handler that counts its side effects."""

    def __init__(self) -> None:
        self.args: list[dict] = []

    async def __call__(self, args, ctx):
        self.args.append(dict(args))
        return {"n": args["n"], "call": len(self.args)}


def kernel_on(results, calls: Calls) -> EventKernel:
    registry = EventRegistry([make_definition("test.alpha", "alpha", calls)])
    return EventKernel(registry, idempotency=IdempotencyStore(results))


async def run_one(kernel: EventKernel, context, *, n: int, event_id: str = "cmd_toy_c1"):
    request = EventRequest(name="test.alpha", turn_id="remote.c1", source=SourceProtocol.HOST, arguments={"n": n},
                           event_id=event_id)
    outcome = await kernel.run_batch(EventBatch(session_id="remote", turn_id="remote.c1", requests=(request,)),
                                     context)
    return outcome.results[0]


async def test_same_event_id_and_arguments_is_a_duplicate_other_arguments_are_not(make_store, context):
    """Design: the key is session + turn + event id + normalized arguments, and a duplicate is one only when the
    normalized arguments are equivalent. So the same id with other arguments runs (it is a different request)."""
    calls = Calls()
    kernel = kernel_on(make_store(), calls)
    first = await run_one(kernel, context, n=3)
    again = await run_one(kernel, context, n=3)
    other = await run_one(kernel, context, n=4)
    assert calls.args == [{"n": 3}, {"n": 4}]
    assert (first.replayed, again.replayed, other.replayed) == (False, True, False)
    assert again.result == first.result == {"n": 3, "call": 1} and other.result == {"n": 4, "call": 2}
    assert other.idempotency_key != first.idempotency_key


async def test_a_redelivery_after_a_restart_applies_once(tmp_path, context):
    path, calls = tmp_path / "idempotency.sqlite3", Calls()
    before = SqliteResultStore(path)
    first = await run_one(kernel_on(before, calls), context, n=5)
    before.close()
    after = SqliteResultStore(path)  # a new process: new kernel, new store, same file
    try:
        again = await run_one(kernel_on(after, calls), context, n=5)
        changed = await run_one(kernel_on(after, calls), context, n=6)
    finally:
        after.close()
    assert calls.args == [{"n": 5}, {"n": 6}]
    assert again.replayed and again.result == first.result and again.status is EventStatus.SUCCEEDED
    assert not changed.replayed


async def test_a_timed_out_event_is_not_remembered(tmp_path, context):
    """A timeout may or may not have acted; remembering it would answer every retry with a timeout for a day."""
    import asyncio

    calls = Calls()
    hang = asyncio.Event()

    async def slow(args, ctx):
        calls.args.append(dict(args))
        await hang.wait()
        return {}

    store = SqliteResultStore(tmp_path / "i.sqlite3")
    try:
        registry = EventRegistry([make_definition("test.alpha", "alpha", slow, timeout_s=0.05)])
        kernel = EventKernel(registry, idempotency=IdempotencyStore(store))
        result = await run_one(kernel, context, n=1)
        assert result.status is EventStatus.TIMED_OUT and await store.count() == 0
    finally:
        hang.set()
        store.close()


def test_a_folder_in_place_of_the_file_is_refused_at_start(tmp_path):
    with pytest.raises(IdempotencyStoreError, match=str(tmp_path)):
        SqliteResultStore(tmp_path)
