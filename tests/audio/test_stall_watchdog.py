"""ReopeningSource's stall watchdog: a mic that stops delivering without an error is re-opened, and nothing else is.

These tests pin what the watchdog must and must not treat as a stall: steady frames, a consumer slower than the
timeout, a stopped mic, a cancelled consumer; and that a relaxed delivery is asked of a replaced mic too. The
sources are in-memory test doubles of the AudioSource port; the real device path is tests/hil/test_recovery.py.

Every test runs on virtual time (toy_runtime/testing/virtual_time.py): the loop's clock moves only when every task
waits, so a busy machine cannot stretch a pause between two frames into a "stall", and the watchdog's timeout is
asserted exactly."""

from __future__ import annotations

import asyncio

import pytest

from toy_runtime.audio.recovery import RecoveryEvent, ReopeningSource
from toy_runtime.ports.audio import AudioFrame
from toy_runtime.testing.virtual_time import virtual_time

STALL_S = 0.2


class HandFedSource:
    """An AudioSource whose frames the test hands in (`feed`); it delivers nothing otherwise, like a stalled mic."""

    sample_rate_hz = 16000
    frame_ms = 20
    live_clock = False

    def __init__(self) -> None:
        self.queue: asyncio.Queue[AudioFrame | None] = asyncio.Queue()
        self.overflows = 0
        self.started = self.closed = False
        self.sent = 0
        self.waiting = asyncio.Event()  # a reader is waiting for a frame that has not come
        self.relaxed = False

    def relax_delivery(self, relaxed: bool) -> None:
        self.relaxed = relaxed

    def feed(self, count: int = 1) -> None:
        for _ in range(count):
            self.queue.put_nowait(AudioFrame(self.sent.to_bytes(2, "little") * 320, 16000, self.sent * 0.02))
            self.sent += 1

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def aclose(self) -> None:
        self.closed = True
        self.queue.put_nowait(None)

    def __aiter__(self):
        return self

    async def __anext__(self) -> AudioFrame:
        if self.queue.empty():
            self.waiting.set()
        frame = await self.queue.get()
        self.waiting.clear()
        if frame is None:
            raise StopAsyncIteration
        return frame


class Rig:
    """A ReopeningSource over HandFedSources, the sources it built and the recovery events it reported."""

    def __init__(self, stall_s: float = STALL_S) -> None:
        self.sources: list[HandFedSource] = []
        self.events: list[RecoveryEvent] = []
        self.mic = ReopeningSource(self._build, stall_timeout_s=stall_s, initial_backoff_s=0.0, max_backoff_s=0.0,
                                   on_event=self.events.append)

    def _build(self) -> HandFedSource:
        self.sources.append(HandFedSource())
        return self.sources[-1]

    @property
    def current(self) -> HandFedSource:
        return self.sources[-1]

    def consume(self, hold_s: float = 0.0, name: str = "test-consumer") -> tuple[list[AudioFrame], asyncio.Task]:
        """The frames a new consumer task collects (holding each `hold_s`), and the task."""
        got: list[AudioFrame] = []
        return got, asyncio.create_task(_collect(self.mic, got, hold_s), name=name)


async def _collect(mic: ReopeningSource, into: list[AudioFrame], hold_s: float = 0.0) -> None:
    async for frame in mic:
        into.append(frame)
        if hold_s:
            await asyncio.sleep(hold_s)  # a consumer busy elsewhere between frames


async def until(condition, what: str = "", timeout_s: float = 5.0) -> float:
    """Wait until `condition()` holds (at most `timeout_s`, then fail with `what`); the seconds it took."""
    loop = asyncio.get_running_loop()
    since = loop.time()
    while not condition():
        assert loop.time() - since < timeout_s, what or "timed out"
        await asyncio.sleep(0.005)
    return loop.time() - since


@virtual_time
async def test_steady_frames_are_never_taken_for_a_stall():
    rig = Rig()
    await rig.mic.start()
    got, consumer = rig.consume()
    for _ in range(100):  # frames every 10 ms for five stall timeouts
        rig.current.feed()
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    await rig.mic.aclose()
    await asyncio.wait_for(consumer, 2)
    assert rig.events == [] and len(rig.sources) == 1
    assert [int.from_bytes(f.pcm[:2], "little") for f in got] == list(range(100))


@virtual_time
async def test_a_mic_that_goes_silent_is_reported_stalled_and_replaced():
    rig = Rig()
    await rig.mic.start()
    got, consumer = rig.consume()
    rig.current.feed(3)
    noticed_after = await until(lambda: len(rig.sources) >= 2, "the stall was never noticed")
    assert noticed_after == pytest.approx(STALL_S, abs=0.01)  # one timeout after the last frame, not sooner or later
    lost = [e for e in rig.events if e.kind == "lost"]
    assert [e.code for e in lost] == ["device-stalled"]
    assert rig.sources[0].closed and rig.current.started
    await until(lambda: any(e.kind == "recovered" for e in rig.events), "no recovery")
    rig.current.feed(2)
    await until(lambda: len(got) >= 5)
    await rig.mic.aclose()
    await asyncio.wait_for(consumer, 2)
    assert len(got) == 5 and not consumer.cancelled()


@virtual_time
async def test_a_consumer_slower_than_the_timeout_is_not_a_stall():
    """The timeout is for the wait on the device: time the consumer spends elsewhere between frames is not counted
    (the consumer takes two timeouts over each frame, then waits a quarter of one for the next)."""
    stall_s = 0.4
    rig = Rig(stall_s=stall_s)
    await rig.mic.start()
    got, consumer = rig.consume(hold_s=2 * stall_s)
    for n in range(1, 4):
        rig.current.feed()
        await until(lambda: len(got) >= n)
        await rig.current.waiting.wait()  # done with the frame, waiting for the next
        await asyncio.sleep(0.25 * stall_s)
    rig.current.feed()
    await until(lambda: len(got) >= 4)
    await rig.mic.aclose()
    await asyncio.wait_for(consumer, 5)
    assert rig.events == [] and len(rig.sources) == 1


@virtual_time
async def test_no_stall_while_stopped_and_the_watchdog_is_back_after_start():
    rig = Rig()
    await rig.mic.start()
    got, consumer = rig.consume()
    rig.current.feed()
    await until(lambda: got)
    await rig.mic.stop()  # push-to-talk released: silence is expected, however long
    await asyncio.sleep(3 * STALL_S)
    assert rig.events == []
    rig.current.feed()  # the wait that began while stopped ends
    await until(lambda: len(got) >= 2)
    await rig.mic.start()
    rig.current.feed()
    await until(lambda: len(got) >= 3)
    await until(lambda: rig.events, "the watchdog did not come back after start()")  # started, silent: a stall
    assert rig.events[0].code == "device-stalled"
    await rig.mic.aclose()
    await asyncio.wait_for(consumer, 2)


@virtual_time
async def test_cancelling_the_consumer_is_a_cancellation_not_a_stall():
    rig = Rig()
    await rig.mic.start()
    got, consumer = rig.consume()
    rig.current.feed()
    await until(lambda: got)
    await asyncio.sleep(0.5 * STALL_S)
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    await asyncio.sleep(1.5 * STALL_S)  # no wait is open: nothing may be taken for a stall now
    assert rig.events == [] and len(rig.sources) == 1
    # and iterating again later works, frames in order
    again, second = rig.consume(name="test-consumer-2")
    rig.current.feed(2)
    await until(lambda: len(again) >= 2)
    await rig.mic.aclose()
    await asyncio.wait_for(second, 2)
    assert [int.from_bytes(f.pcm[:2], "little") for f in got + again] == [0, 1, 2]


@virtual_time
async def test_a_relaxed_delivery_is_asked_of_the_replacement_too():
    rig = Rig()
    await rig.mic.start()
    rig.mic.relax_delivery(True)  # a listener waiting for speech
    assert rig.current.relaxed
    got, consumer = rig.consume()
    await until(lambda: any(e.kind == "recovered" for e in rig.events), "no recovery")  # silent: stalled, replaced
    assert len(rig.sources) == 2 and rig.current.relaxed
    rig.mic.relax_delivery(False)
    assert not rig.current.relaxed
    await rig.mic.aclose()
    await asyncio.wait_for(consumer, 2)
