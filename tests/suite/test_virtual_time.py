"""The virtual-time loop (toy_runtime/testing/virtual_time.py): its clock moves only when every task waits, straight
to the next timer, in order; real I/O still wakes it."""

from __future__ import annotations

import asyncio
import threading

from toy_runtime.testing.virtual_time import VirtualTimeLoop, virtual_time


@virtual_time
async def test_an_hour_of_sleep_is_an_hour_of_loop_time_in_timer_order() -> None:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop) and loop.time() == 0.0
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        woke.append((name, loop.time()))

    await asyncio.gather(sleeper("hour", 3600), sleeper("tenth", 0.1), sleeper("minute", 60))
    assert woke == [("tenth", 0.1), ("minute", 60.0), ("hour", 3600.0)]


@virtual_time
async def test_the_clock_stands_still_while_a_task_runs_and_a_timeout_fires_at_exactly_its_time() -> None:
    loop = asyncio.get_running_loop()
    sum(range(200_000))  # work takes no loop time, however slow the machine
    assert loop.time() == 0.0
    try:
        async with asyncio.timeout(0.2):
            await asyncio.Event().wait()
    except TimeoutError:
        assert loop.time() == 0.2
    else:
        raise AssertionError("the timeout did not fire")


@virtual_time
async def test_a_thread_still_wakes_the_loop_when_no_timer_is_pending() -> None:
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    threading.Thread(target=lambda: loop.call_soon_threadsafe(done.set), name="test-waker").start()
    await done.wait()
    assert loop.time() == 0.0
