"""The kernel's clocks, exactly: timings, deadlines, the terminal barrier and conflict order on virtual time.

Every test runs on a VirtualTimeLoop and (`loop_clock`) makes the kernel's `time.perf_counter` read that loop's
clock, so each millisecond the kernel reports is a known number on any machine, busy or not. These pin down the
kernel's arithmetic and ordering that a mutation run (docs/testing-mutation.md) changed without a test noticing.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

import toy_runtime.events.kernel as kernel_module
from toy_runtime.audit import MemoryAudit
from toy_runtime.events import EventRequest, EventStatus, SourceProtocol
from toy_runtime.audit.kinds import AuditKind
from toy_runtime.events.fallback import FallbackAnswer
from toy_runtime.testing.virtual_time import virtual_time

from .conftest import kernel_for, make_definition

EXACT = 1e-6  # milliseconds: float noise only


@pytest.fixture
def loop_clock(monkeypatch):
    """The kernel's perf_counter reads the running (virtual) loop's clock."""
    clock = SimpleNamespace(perf_counter=lambda: asyncio.get_running_loop().time())
    monkeypatch.setattr(kernel_module, "time", clock)


def request(name="test.alpha", n=3, source=SourceProtocol.TOOL_CALLS):
    return EventRequest(name=name, turn_id="t1", source=source, arguments=None if n is None else {"n": n})


def sleeping(seconds: float, log: list | None = None, tag: str = ""):
    """A handler that takes `seconds` of loop time and logs (tag, start) when given a log."""

    async def handle(args, ctx):
        if log is not None:
            log.append((tag, asyncio.get_running_loop().time()))
        await asyncio.sleep(seconds)
        return {}

    return handle


class SlowFallback:
    """An EventAgent that takes `seconds` to answer {"n": 2}."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def propose(self, definition, proposed, missing, context, *, turn_id=None):
        await asyncio.sleep(self.seconds)
        return FallbackAnswer(arguments={"n": 2}, prompt_tokens=7)


@virtual_time
async def test_every_timing_is_the_clocks_milliseconds(context, loop_clock):
    """Guards the ms arithmetic of dispatch delay, queued, execute, total and batch time (and their rounding):
    alpha runs 250 ms; beta waits 250 ms for the one execution slot, then runs 250 ms."""
    audit = MemoryAudit()
    a = make_definition("test.alpha", "alpha", sleeping(0.25))
    b = make_definition("test.beta", "beta", sleeping(0.25))
    kernel = kernel_for(a, b, audit=audit, max_concurrency=1)
    await asyncio.sleep(0.4999568)
    run = kernel.open_batch("s1", "t1", context)  # t0 = 0.4999568
    await asyncio.sleep(0.1250432)  # 0.625
    run.add(request(), detected_at=0.625 - 0.0123456)  # the model's text named it 12.3456 ms before it was added
    run.add(request("test.beta"))
    run.close()
    outcome = await run.wait()  # beta ends at 1.125
    alpha, beta = outcome.results
    assert outcome.dispatch_delays_ms == (12.346, 0.0)
    assert outcome.elapsed_ms == pytest.approx(625.0432, abs=EXACT)
    assert (alpha.timings.queued_ms, alpha.timings.execute_ms) == (0.0, pytest.approx(250.0, abs=EXACT))
    assert alpha.timings.total_ms == pytest.approx(250.0, abs=EXACT)  # from its start, not the batch's
    assert beta.timings.queued_ms == pytest.approx(250.0, abs=EXACT)
    assert beta.timings.execute_ms == pytest.approx(250.0, abs=EXACT)
    assert beta.timings.total_ms == pytest.approx(500.0, abs=EXACT)
    [done] = audit.of(AuditKind.BATCH_COMPLETED)
    assert done["ms"] == round(outcome.elapsed_ms, 3) == 625.043 and done["dispatch_delay_ms"] == [12.346, 0.0]


@virtual_time
async def test_the_deadline_runs_from_the_first_request_not_the_close(context, loop_clock):
    """Guards when the deadline starts (`_dispatched_at`) and the deadline arithmetic; the timed-out result keeps
    the arguments it resolved and says which limit passed."""
    loop = asyncio.get_running_loop()
    hang = make_definition("test.alpha", "alpha", sleeping(100), timeout_s=50)
    run = kernel_for(hang, batch_deadline_s=1.0).open_batch("s1", "t1", context)
    await asyncio.sleep(0.25)
    run.add(request())
    await asyncio.sleep(0.75)  # a long reply after its first event
    run.close()
    [r] = (await run.wait()).results
    assert loop.time() == pytest.approx(1.25)
    assert r.status is EventStatus.TIMED_OUT and r.error_code == "batch_deadline"
    assert r.error == "batch deadline of 1s passed" and r.arguments == {"n": 3}


@virtual_time
async def test_a_wait_that_starts_after_the_deadline_returns_at_once(context, loop_clock):
    """Guards the 1 ms floor of the close wait: a batch nobody closed, waited on after its deadline, ends now."""
    loop = asyncio.get_running_loop()
    hang = make_definition("test.alpha", "alpha", sleeping(100), timeout_s=50)
    run = kernel_for(hang, batch_deadline_s=1.0).open_batch("s1", "t1", context)
    run.add(request())
    await asyncio.sleep(2.0)
    [r] = (await run.wait()).results
    assert loop.time() - 2.0 < 0.1 and r.status is EventStatus.TIMED_OUT


@virtual_time
async def test_a_handler_that_ignores_cancel_holds_the_batch_one_second_at_most(context, loop_clock):
    """Guards the 1 s grace after the deadline's cancel and the final cancel: a handler that swallows the first
    cancel is cancelled again when the grace ends, and the batch returns then."""
    loop = asyncio.get_running_loop()

    async def stubborn(args, ctx):
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            pass  # a badly written plugin
        await asyncio.sleep(100)
        return {}

    a = make_definition("test.alpha", "alpha", stubborn, timeout_s=50)
    run = kernel_for(a, batch_deadline_s=1.0).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    [r] = (await run.wait()).results
    assert loop.time() == pytest.approx(2.0) and r.status is EventStatus.TIMED_OUT
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert run.slots[0].task.done()  # nothing of the batch runs on after it


@virtual_time
async def test_a_lone_terminal_event_runs_at_once(context, loop_clock):
    """Guards the barrier's sibling list (never the event itself) and its `siblings and` condition."""
    started = []
    end = make_definition("test.end", "end", sleeping(0, started, "end"), terminal=True)
    run = kernel_for(end, terminal_barrier_s=4.0).open_batch("s1", "t1", context)
    await asyncio.sleep(0.5)
    run.add(request("test.end"))
    run.close()
    [r] = (await run.wait()).results
    assert r.status is EventStatus.SUCCEEDED and started == [("end", pytest.approx(0.5))]


@virtual_time
async def test_the_terminal_barrier_is_timed_from_the_close(context, loop_clock):
    """Guards `remaining = closed_at + barrier - now`: the terminal event first waits 2 s for the event it
    conflicts with, then only the 2 s left of its 4 s barrier for a sibling that hangs."""
    started = []
    first = make_definition("test.first", "first", sleeping(2.0, started, "first"), concurrency_class="k")
    hang = make_definition("test.hang", "hang", sleeping(100), timeout_s=50)
    end = make_definition("test.end", "end", sleeping(0, started, "end"), terminal=True, concurrency_class="k")
    run = kernel_for(first, hang, end, terminal_barrier_s=4.0, batch_deadline_s=30).open_batch("s1", "t1", context)
    await asyncio.sleep(0.5)
    for name in ("test.first", "test.hang", "test.end"):
        run.add(request(name))
    run.close()  # at 0.5: the barrier ends at 4.5
    await run.wait()
    assert started == [("first", pytest.approx(0.5)), ("end", pytest.approx(4.5))]


@virtual_time
async def test_an_event_waits_for_an_earlier_conflicting_one_even_while_that_one_resolves(context, loop_clock):
    """Guards the blockers list: same-class events run in input order even when the first spends a second with
    the EventAgent (the lock alone would let the second take it first)."""
    started = []
    a = make_definition("test.alpha", "alpha", sleeping(0.1, started, "alpha"), concurrency_class="k")
    b = make_definition("test.beta", "beta", sleeping(0.1, started, "beta"), concurrency_class="k")
    run = kernel_for(a, b, fallback=SlowFallback(1.0)).open_batch("s1", "t1", context)
    run.add(request(n=None))  # no number: the EventAgent is asked
    run.add(request("test.beta"))
    run.close()
    outcome = await run.wait()
    assert [r.status for r in outcome.results] == [EventStatus.SUCCEEDED] * 2
    assert [tag for tag, _ in started] == ["alpha", "beta"]


@virtual_time
async def test_an_unrelated_slow_event_does_not_hold_up_a_classed_one(context, loop_clock):
    """Guards `keys and (their keys & mine)`: only a shared class blocks, not any earlier event."""
    started = []
    slow = make_definition("test.slow", "slow", sleeping(1.0, started, "slow"))
    keyed = make_definition("test.keyed", "keyed", sleeping(0, started, "keyed"), concurrency_class="k")
    run = kernel_for(slow, keyed).open_batch("s1", "t1", context)
    run.add(request("test.slow"))
    run.add(request("test.keyed"))
    run.close()
    await run.wait()
    assert dict(started) == {"slow": pytest.approx(0.0), "keyed": pytest.approx(0.0)}


@virtual_time
async def test_the_deadline_while_the_event_agent_still_thinks(context, loop_clock):
    """Guards the result of an event with no resolution yet: no arguments, zero resolve/fallback figures."""
    a = make_definition("test.alpha", "alpha", sleeping(0))
    run = kernel_for(a, fallback=SlowFallback(100), batch_deadline_s=1.0).open_batch("s1", "t1", context)
    run.add(request(n=None))
    run.close()
    [r] = (await run.wait()).results
    assert r.status is EventStatus.TIMED_OUT and r.arguments == {} and r.missing == ()
    assert (r.timings.resolve_ms, r.timings.fallback_ms) == (0.0, 0.0)
    assert r.fallback_used is False and r.fallback_tokens == 0


@virtual_time
async def test_an_aborted_waiting_event_ends_cancelled_with_no_delay(context, loop_clock):
    """Guards the aborted path: a request cancelled before it ever started reports a 0 ms dispatch delay, and a
    cancelled task ends cancelled (not in an error from publishing a result it never had)."""
    a = make_definition("test.alpha", "alpha", sleeping(1.0), concurrency_class="k")
    b = make_definition("test.beta", "beta", sleeping(0), concurrency_class="k")
    run = kernel_for(a, b).open_batch("s1", "t1", context)
    run.add(request())
    await asyncio.sleep(0.1)
    run.add(request("test.beta"))  # waits for alpha
    await asyncio.sleep(0.1)
    never = request("test.beta", n=4)
    run.add(never)  # cancelled before its task ever runs
    cancelled = run.abort()
    outcome = await run.wait()
    assert never.event_id in cancelled and len(cancelled) == 2
    assert run.slots[1].task.cancelled() and run.slots[2].task.cancelled()
    assert outcome.dispatch_delays_ms[2] == 0.0


@virtual_time
async def test_two_terminal_events_do_not_wait_for_each_other(context, loop_clock):
    """Guards the sibling filter `o is not slot and not o.definition.terminal`: a terminal event waits only for the
    non-terminal ones; two terminal events waiting for each other would both sit out the whole 4 s barrier."""
    started: list = []
    end = make_definition("test.end", "end", sleeping(0, started, "end"), terminal=True)
    off = make_definition("test.off", "off", sleeping(0, started, "off"), terminal=True)
    run = kernel_for(end, off, terminal_barrier_s=4.0).open_batch("s1", "t1", context)
    run.add(request("test.end"))
    run.add(request("test.off"))
    run.close()
    outcome = await run.wait()
    assert [r.status for r in outcome.results] == [EventStatus.SUCCEEDED] * 2
    assert sorted(tag for tag, _ in started) == ["end", "off"]
    assert all(at == 0 for _, at in started), started
