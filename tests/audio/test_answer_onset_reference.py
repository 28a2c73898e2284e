"""The render handed to the echo canceller is what the speaker played, also at an answer's first sound.

Late in long runs on the echo rig the capture side came to read 10-17 ms past what the speaker had reported. While
the toy is silent it is handed silence for that stretch without waiting (the child's end of turn must not wait for
the speaker); when an answer then started, its first 10-17 ms were heard where the canceller had been told nothing
played, AEC3 let the onset through, and the VAD took it for the child (docs/benchmarks.md, "Ears", ninth round).
The speaker now starts an answer after as much silence as was handed out ahead of it, and the capture side waits for
the render while audio is queued. Driven here block by block through the speaker's own PortAudio callback.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np

from toy_runtime.adapters.sounddevice_speaker import SoundDeviceSink
from toy_runtime.audio.echo_reference import EchoReference
from toy_runtime.audio.pcm_io import AnswerFutures

RATE = 16000
BLOCK = RATE // 100  # the speaker's 10 ms block
FRAME = RATE // 100  # the capture side's 10 ms piece


class Rig:
    """A speaker whose callback the test calls (a block at a time, DAC times following the count) and an echo
    reference read by a capture side that starts `ahead_ms` past the speaker's reports."""

    def __init__(self, *, lead_in: bool) -> None:
        self.reference = EchoReference(RATE)
        self.sink = SoundDeviceSink(sample_rate_hz=RATE, reference=self.reference)
        if not lead_in:
            self.sink._lead_in = lambda: b""  # type: ignore[method-assign]  # as before the change
        self.played = bytearray()  # every block the speaker handed the device: the truth
        self.blocks = 0
        self.handed: list[tuple[int, bytes]] = []  # (ring index, render) of each take

    def block(self) -> None:
        out = bytearray(BLOCK * 2)
        timing = SimpleNamespace(outputBufferDacTime=0.001 + self.blocks * BLOCK / RATE, currentTime=0.0)
        self.sink._callback(out, BLOCK, timing, SimpleNamespace(output_underflow=False))
        self.blocks += 1
        self.played += out

    def take(self, capture_time_s: float | None = None) -> None:
        """One capture piece's render, at the read position (or anchored at `capture_time_s`)."""
        read_s = self.reference.timeline()[0]
        at = capture_time_s if capture_time_s is not None else read_s - self.reference.lead_s
        render = self.reference.take(at, FRAME)
        read_s, start_s = self.reference.timeline()[:2]
        first = int(round((read_s - FRAME / RATE - start_s) * RATE))
        self.handed.append((first, render))

    def mismatched_samples(self) -> int:
        """Samples handed to the canceller that differ from what the speaker played at that moment."""
        truth = np.frombuffer(bytes(self.played), np.int16)
        wrong = 0
        for first, render in self.handed:
            got = np.frombuffer(render, np.int16)
            want = truth[first : first + len(got)]
            wrong += int(np.count_nonzero(got[: len(want)] != want))
        return wrong


async def play_an_answer_over_a_capture_reading_ahead(rig: Rig, ahead_ms: float = 15.0) -> tuple[float, float]:
    sink = rig.sink
    sink._stream, sink._loop, sink._answers = object(), asyncio.get_running_loop(), AnswerFutures()
    for _ in range(30):  # 300 ms of silence: a quiet tail
        rig.block()
    rig.reference.handed_ahead_s()  # takes in what the speaker reported (the capture side's bookkeeping)
    end_s = rig.reference.timeline()[2]
    rig.take(end_s + ahead_ms / 1000 - rig.reference.lead_s)  # the capture reads `ahead_ms` past the reports
    rig.take()
    missing_before = rig.reference.missing_s(FRAME)  # quiet tail, nothing queued: nothing to wait for
    tone = (np.sin(np.arange(RATE // 5) * 2 * np.pi * 440 / RATE) * 8000).astype(np.int16).tobytes()
    await sink.play(tone, RATE, "a1")
    missing_after = rig.reference.missing_s(FRAME)  # the answer is queued: the render to come is not silence
    for _ in range(40):  # then the two sides in step, the capture waiting for what it needs (as the stage does)
        rig.block()
        if not rig.reference.missing_s(FRAME):
            rig.take()
    return missing_before, missing_after


def test_an_answer_starting_while_the_capture_reads_ahead_is_handed_to_the_canceller_whole():
    rig = Rig(lead_in=True)
    missing_before, missing_after = asyncio.run(play_an_answer_over_a_capture_reading_ahead(rig))
    assert missing_before == 0.0
    assert missing_after > 0.0
    assert rig.sink.lead_ins == 1
    assert any(np.frombuffer(render, np.int16).any() for _, render in rig.handed)  # the answer was handed out
    assert rig.mismatched_samples() == 0


def test_without_the_lead_in_the_answers_onset_is_handed_as_silence():
    """The scenario above does exercise the fault: the speaker starting at once puts the tone where the
    canceller was already handed silence."""
    rig = Rig(lead_in=False)
    asyncio.run(play_an_answer_over_a_capture_reading_ahead(rig))
    assert rig.sink.lead_ins == 0
    assert rig.mismatched_samples() > 0


def test_no_lead_in_when_the_capture_reads_behind_the_speaker():
    """The usual case: the speaker reports ahead of the capture, and an answer starts at once."""
    rig = Rig(lead_in=True)
    asyncio.run(play_an_answer_over_a_capture_reading_ahead(rig, ahead_ms=-30.0))
    assert rig.sink.lead_ins == 0
    assert rig.mismatched_samples() == 0


def test_handed_ahead_is_what_the_capture_read_past_the_reports():
    reference = EchoReference(RATE)
    assert reference.handed_ahead_s() == 0.0  # nothing played yet
    reference.played(bytes(2 * BLOCK), RATE, 10.0)
    reference.take(10.0 - reference.lead_s, FRAME)  # reads the reported block: nothing ahead
    assert reference.handed_ahead_s() == 0.0
    reference.take(10.0 - reference.lead_s + FRAME / RATE, FRAME)  # one piece past the one block reported
    assert abs(reference.handed_ahead_s() - FRAME / RATE) < 1e-6
