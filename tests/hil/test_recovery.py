"""Unplug/replug: the runtime's mic and speaker adapters report a lost device with a clear AudioDeviceError, and the
reopening wrappers (toy_runtime.audio.recovery) bring audio back once the device returns.

Virtual rig: every sink of the card is unloaded (running streams die, opening "pulse" fails) and loaded again.
Real rig: only with TOY_HIL_UNPLUG=1 — a human pulls and re-inserts the USB plug when asked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import pytest

from tests.hil.conftest import ENV_UNPLUG
from tests.hil.probe import RATE, FrameTape, chirp, dbfs, locate
from toy_runtime.audio.recovery import RecoveryEvent, ReopeningSink, ReopeningSource
from toy_runtime.ports.audio import AudioDeviceError

pytestmark = pytest.mark.hil


async def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


def kinds(events: list[RecoveryEvent], role: str) -> list[str]:
    return [e.kind for e in events if e.role == role]


def first(events: list[RecoveryEvent], role: str, kind: str) -> RecoveryEvent:
    return next(e for e in events if e.role == role and e.kind == kind)


@pytest.fixture
def adapters(rig):
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSink, SoundDeviceSource

    return (lambda: SoundDeviceSource(rig.mic, block_frames=1),
            lambda: SoundDeviceSink(rig.speaker, sample_rate_hz=RATE))


class Operator:
    """Who unplugs: the virtual card, or a human asked on the terminal (TOY_HIL_UNPLUG=1)."""

    def __init__(self, rig, capsys) -> None:
        self.rig, self.capsys = rig, capsys
        self.timeout_s = 5.0 if rig.virtual else 90.0

    def _ask(self, text: str) -> None:
        with self.capsys.disabled():
            print(f"\n>>> {text}", flush=True)

    def unplug(self) -> None:
        if self.rig.virtual:
            self.rig.unplug()
        else:
            self._ask(f"UNPLUG the USB audio device now (waiting up to {self.timeout_s:.0f} s)")

    def replug(self) -> None:
        if self.rig.virtual:
            self.rig.replug()
        else:
            self._ask(f"PLUG the USB audio device back in (waiting up to {self.timeout_s:.0f} s)")


async def test_unplugged_devices_are_reported_and_audio_flows_after_replug(rig, adapters, capsys):
    if not rig.virtual and not os.environ.get(ENV_UNPLUG):
        pytest.skip(f"unplug/replug on a real rig needs a human: set {ENV_UNPLUG}=1 and pull the plug when asked")
    make_mic, make_speaker = adapters
    events: list[RecoveryEvent] = []
    mic = ReopeningSource(make_mic, initial_backoff_s=0.1, max_backoff_s=0.5, stall_timeout_s=1.5,
                          on_event=events.append)
    speaker = ReopeningSink(make_speaker, initial_backoff_s=0.1, max_backoff_s=0.5, max_attempts=None,
                            on_event=events.append)
    operator = Operator(rig, capsys)
    tape = FrameTape()
    await mic.start()
    await speaker.start()
    recorder = asyncio.create_task(tape.record(mic), name="hil:capture")
    player = None
    try:
        await wait_until(lambda: len(tape.frames) > 10, 5, "audio before the unplug")
        operator.unplug()
        await wait_until(lambda: "lost" in kinds(events, "mic"), operator.timeout_s, "the mic to report the loss")
        # the speaker notices on its next use: a chunk played while unplugged waits for the device to come back
        player = asyncio.create_task(speaker.play(bytes(RATE // 5 * 2), RATE, "while-unplugged"), name="hil:play")
        await wait_until(lambda: "retry" in kinds(events, "mic") and "retry" in kinds(events, "speaker"),
                         operator.timeout_s, "failed re-open attempts while unplugged")
        assert not player.done(), "play() returned while the speaker was unplugged"
        assert mic.down_s is not None and mic.down_s > 0  # what the service watchdog withholds its pings on
        operator.replug()
        await wait_until(lambda: "recovered" in kinds(events, "mic") and "recovered" in kinds(events, "speaker"),
                         operator.timeout_s * 2, "both devices to be re-opened")
        await asyncio.wait_for(player, 5)

        # audio flows again: a burst through the re-opened speaker is heard by the re-opened mic
        back = time.monotonic()
        await wait_until(lambda: len(tape.since(back)) > 10, 5, "frames from the re-opened mic")
        assert mic.down_s is None
        burst = chirp()
        started = speaker.first_sample("after-replug")
        await speaker.play(burst.tobytes(), RATE, "after-replug")
        await speaker.drain()
        written_at = await started
        await asyncio.sleep(0.5)
    finally:
        if player is not None and not player.done():
            player.cancel()
            with contextlib.suppress(asyncio.CancelledError, AudioDeviceError):
                await player
        await speaker.aclose()
        await mic.aclose()
        await asyncio.wait_for(recorder, 5)

    # the speaker adapter said what happened, with a stable code
    lost = first(events, "speaker", "lost")
    assert lost.code == "device-lost" and "ended unexpectedly" in lost.message, lost
    # so does the mic adapter — unless PortAudio's finished-callback race hides the loss from it (it checks
    # `stream.active`, which PortAudio clears only after the callback): then the stall watchdog catches it
    lost = first(events, "mic", "lost")
    assert lost.code in ("device-lost", "device-stalled"), lost
    for role in ("mic", "speaker"):
        assert kinds(events, role)[-1] == "recovered", kinds(events, role)
        assert "gave_up" not in kinds(events, role)
    retry = first(events, "mic", "retry")
    assert retry.code == "device-open-failed", retry
    assert mic.recoveries >= 1 and speaker.recoveries == 1

    assert written_at is not None
    frames = tape.since(written_at - 0.1)
    index, heard_at, ratio = locate(frames, burst)
    level = dbfs(FrameTape.pcm(frames)[index : index + len(burst)])
    print(f"\n[hil {rig.mode}] recovery: mic lost as {first(events, 'mic', 'lost').code}, mic down {first(events, 'mic', 'recovered').down_s:.2f} s, "
          f"speaker down {first(events, 'speaker', 'recovered').down_s:.2f} s; after replug burst {level:.1f} dBFS, "
          f"latency {(heard_at - written_at) * 1000:.1f} ms, peak/median {ratio:.0f}")
    assert level > -60.0 and ratio > 10, (level, ratio)


async def test_a_stalled_mic_is_reopened(rig, adapters):
    """A mic that stops delivering without an error (here: its PulseAudio sink suspended) trips the stall watchdog."""
    if not rig.virtual:
        pytest.skip("a stall cannot be provoked on a real rig from here")
    events: list[RecoveryEvent] = []
    mic = ReopeningSource(adapters[0], stall_timeout_s=1.0, initial_backoff_s=0.1, max_backoff_s=0.3,
                          on_event=events.append)
    tape = FrameTape()
    await mic.start()
    recorder = asyncio.create_task(tape.record(mic), name="hil:capture")
    try:
        await wait_until(lambda: len(tape.frames) > 10, 5, "audio before the stall")
        rig.card.pactl("suspend-sink", "mic", "1")
        try:
            await wait_until(lambda: "lost" in kinds(events, "mic"), 5, "the stall to be noticed")
        finally:
            rig.card.pactl("suspend-sink", "mic", "0")
        await wait_until(lambda: "recovered" in kinds(events, "mic"), 10, "the mic to be re-opened")
        back = time.monotonic()
        await wait_until(lambda: len(tape.since(back)) > 10, 5, "frames after the stall")
    finally:
        await mic.aclose()
        await asyncio.wait_for(recorder, 5)
    lost = first(events, "mic", "lost")
    assert lost.code == "device-stalled", lost
    assert mic.recoveries >= 1


async def test_a_missing_speaker_gives_up_after_bounded_attempts(rig):
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSink

    events: list[RecoveryEvent] = []
    speaker = ReopeningSink(lambda: SoundDeviceSink("no-such-hil-device"), initial_backoff_s=0.05,
                            max_backoff_s=0.1, max_attempts=3, on_event=events.append)
    started = time.monotonic()
    with pytest.raises(AudioDeviceError) as caught:
        await speaker.start()
    assert caught.value.code == "device-not-found"
    assert "did not come back after 3 attempts" in caught.value.message
    assert kinds(events, "speaker") == ["lost", "retry", "retry", "retry", "gave_up"]
    assert time.monotonic() - started < 5  # 0.05 + 0.1 + 0.1 s of backoff, not a hang
    await speaker.aclose()


async def test_the_speaker_wrapper_reopens_per_session(rig, adapters):
    """The voice loop opens the speaker per session; the sounddevice sink cannot restart, the wrapper can."""
    speaker = ReopeningSink(adapters[1])
    for session in range(2):
        await speaker.start()
        done = speaker.first_sample(f"s{session}")
        await speaker.play(bytes(RATE // 10 * 2), RATE, f"s{session}")
        await speaker.drain()
        assert await done is not None
        await speaker.aclose()
    assert speaker.inner is None
