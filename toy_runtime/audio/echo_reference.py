"""What the speaker played, on the capture clock: the far-end signal the echo canceller needs.

The speaker's PortAudio callback calls `played()` with every block it hands to the device (silence included) and
the time that block's first sample reaches the DAC (PortAudio's estimate, on `time.monotonic()`). The capture side
asks `take(t, n)` for the n samples that were sounding at capture time t, so the render frame given with each mic
frame belongs to the same moment whatever the two streams' buffering. Small errors are left to the canceller's own
delay estimate (AEC3 adapts). Both sides follow their sample counts, never the timestamps: only a block or frame
more than `resync_ms` (500) off the drift seen so far — a stream that stopped and started again — re-anchors a
side. PortAudio's time estimates jump by tens of ms now and then with no audio gap behind them: with a 30 ms
threshold each such glitch moved the render against its echo, and the canceller leaked into false barge-ins for
the rest of a long session (the rig: 44 in 26 answers; with 500 ms, none). The speaker stays open between sessions while echo cancellation is on (app/voice_app.py), so the
render and capture streams keep one fixed relation for the canceller.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, cast

if TYPE_CHECKING:
    import numpy as np

    from .resample import Resampler

__all__ = ["EchoReference"]


_SMOOTHING = 0.01  # per frame: about a second, so callback jitter (± 5 ms) averages out
_QUIET_TAIL_S = 0.3  # the speaker's last this-long all below _AUDIBLE_SAMPLE: it is silent, no render to wait for
_AUDIBLE_SAMPLE = 100  # −50 dBFS peak


class EchoReference:
    """A short history of the speaker's output at `sample_rate_hz`, indexed by the time each sample was heard.

    `played()` is safe to call from the audio thread: it only appends to a bounded deque (atomic in CPython);
    the resampling and bookkeeping happen on the reading side, in `take()`. numpy is imported by the first
    `take()`: a speaker can be handed a reference before READY without putting numpy on the listening path.
    """

    def __init__(self, sample_rate_hz: int = 16000, *, keep_s: float = 2.0, resync_ms: float = 500.0,
                 lead_ms: float = 10.0) -> None:
        self.sample_rate_hz = sample_rate_hz
        # Render a little ahead of the capture frame: AEC3 finds echoes that arrive after their reference, never
        # before, so an estimate a few ms late must not put the reference behind its echo (10 ms of slack).
        self.lead_s = lead_ms / 1000.0
        self._keep = int(keep_s * sample_rate_hz)
        self._resync_s = resync_ms / 1000.0
        # (pcm, rate, dac time of sample 0, after_underflow)
        self._incoming: deque[tuple[bytes, int, float, bool]] = deque(maxlen=1024)
        self._resamplers: dict[int, Resampler] = {}
        self._ring: np.ndarray | None = None  # created by the first take()
        self._start_s: float | None = None  # the time of self._ring[0]
        self._read_s: float | None = None  # the time of the next sample `take` hands out
        self._read_drift = 0.0  # smoothed (capture time − read position), seconds
        self._write_drift = 0.0  # smoothed (DAC time − position by sample count), seconds
        self.blocks = 0  # blocks the speaker reported (the reference is fed)
        self.resyncs = 0  # times the speaker's timeline was re-anchored
        self.anchors = 0  # times it was anchored at all: its first block, and every re-anchor
        self.read_resyncs = 0  # times the capture side's read position jumped
        self._speaker_restarted = False  # the speaker side was (re)anchored: the capture side follows
        self.underflow_gaps = 0  # silences the device played while it ran dry, put into the timeline
        self.gap_ms: deque[float] = deque(maxlen=32)  # …and how long each was (ms): a diagnostic for the benches
        self._next_sample: int | None = None  # the capture index the next frame should start at (None: not known)
        self.capture_gaps = 0  # captured audio lost before it reached the canceller, skipped in the render
        self.nudges = 0  # times the read position was moved to keep the echo's measured delay (nudge())
        self.nudged: deque[int] = deque(maxlen=32)  # …and by how many samples each time: a diagnostic for the benches
        # Set by the speaker: it holds audio it has not handed to the device yet, so the render still to be reported
        # is not the silence of a quiet tail (missing_s)
        self.audio_pending: Callable[[], bool] = lambda: False

    # -- speaker side (PortAudio thread) --------------------------------------------------------------------

    def played(self, pcm: bytes, sample_rate_hz: int, dac_time_s: float, *, after_underflow: bool = False) -> None:
        """One block handed to the device, first sample heard at `dac_time_s`. Cheap; never blocks.
        `after_underflow`: the device ran dry before this block (PortAudio said so): it played silence that no block
        carried, as long as the DAC time moved beyond the count."""
        self._incoming.append((pcm, sample_rate_hz, dac_time_s, after_underflow))

    # -- capture side (event loop) ----------------------------------------------------------------------------

    def take(self, capture_time_s: float, samples: int, first_sample: int | None = None) -> bytes:
        """The render samples for a capture frame starting at `capture_time_s` (silence where nothing played).

        Consecutive frames read consecutive samples: a capture timestamp jitters by a few ms from one device
        callback to the next, and a render stream that skipped or repeated samples with it would look like a
        moving echo path to the canceller (measured: residual echo bursts at every answer). Only a frame more than
        `resync_ms` from the read position moves it (a capture restart). `first_sample`, the frame's index in the
        capture stream (AudioFrame.first_sample), says exactly how much audio was lost before it (a device
        overflow, a frame the mic's queue dropped): the read position skips that much render, no more, no less —
        before, a lost 20 ms frame left the render 20 ms behind its echo until the canceller re-learned it.
        """
        import numpy as np

        self._absorb()
        out = np.zeros(samples, dtype=np.int16)
        if first_sample is not None and self._next_sample is not None and self._read_s is not None:
            lost = first_sample - self._next_sample
            if 0 < lost < self._keep:
                self._read_s += lost / self.sample_rate_hz
                self.capture_gaps += 1
            elif lost < 0:  # the index started again: a new capture stream, whose timestamps are its anchor
                self._read_s = None
        self._next_sample = None if first_sample is None else first_sample + samples
        wanted = capture_time_s + self.lead_s
        if self._read_s is None or self._speaker_restarted or abs(wanted - self._read_s - self._read_drift) > \
                self._resync_s:
            if self._read_s is not None and not self._speaker_restarted:  # a real gap (frames dropped, the
                self.read_resyncs += 1  # capture restarted): follow it
            # a speaker (re)started on its own timestamps: the capture side takes its own again, so the two meet
            # on the one clock (whatever drift the capture's count gathered while nothing played)
            self._read_s, self._read_drift, self._speaker_restarted = wanted, 0.0, False
        else:
            # The sample clocks and the monotonic clock drift apart (0.28 ms/s measured on the virtual card) while
            # the echo path, in samples, stays put: the samples are followed and the drift only watched, so that
            # a real gap (a jump away from it) is told from it. Moving the read position at all — a 30 ms jump
            # when the drift added up, single-sample slips, or a few ms put right between answers — made the
            # canceller learn the echo again with leaks loud enough for false barge-ins (measured on the rig).
            self._read_drift += _SMOOTHING * (wanted - self._read_s - self._read_drift)
        at, self._read_s = self._read_s, self._read_s + samples / self.sample_rate_hz
        if self._start_s is None or self._ring is None:
            return out.tobytes()
        first = int(round((at - self._start_s) * self.sample_rate_hz))
        lo, hi = max(first, 0), min(first + samples, len(self._ring))
        if hi > lo:
            out[lo - first : hi - first] = self._ring[lo:hi]
        return out.tobytes()

    def missing_s(self, samples: int) -> float:
        """How much of the render the next `take(…, samples)` will ask for the speaker has not reported yet (s; 0:
        all there, or nothing worth waiting for).

        The speaker reports each block when the device asks for it, its output latency ahead of the DAC. On the
        echo rig that lead shrank by ~0.1 ms/s between underruns (the device consumed a little faster than its
        sample count said), until the capture side asked for samples not yet reported: `take()` filled them with
        silence, and for the rest of the session AEC3 was handed silence while the mic heard the toy (ERLE
        68 → 11-14 dB, 25 false barge-ins in 54 answers). The stage waits for them instead (`EchoCancelledSource`).
        A shortfall of 100 ms or more is a speaker that stopped reporting (closed, stalled): nothing to wait for.
        Nor is a speaker that has played only silence for `_QUIET_TAIL_S` and holds no audio (`audio_pending`):
        silence is what the canceller would be handed anyway, and the child's words then reach the listener without
        a wait (the end of a turn is heard while the toy is silent). With audio pending the next blocks are the
        answer's first: handed as silence, AEC3 had no reference for the echo's onset and let it through (on the
        rig, late in long runs, when the capture had come to read 10-17 ms past the speaker's reports: the false
        barge-ins of docs/benchmarks.md, "Ears", ninth round)."""
        self._absorb()
        end = self.end_s
        if self._read_s is None or self._speaker_restarted or end is None or self._ring is None:
            return 0.0
        missing = self._read_s + samples / self.sample_rate_hz - end
        if not 0.0 < missing < 0.1:
            return 0.0
        if self.audio_pending():
            return missing
        tail = self._ring[-int(_QUIET_TAIL_S * self.sample_rate_hz):]
        return missing if len(tail) and max(int(tail.max()), -int(tail.min())) >= _AUDIBLE_SAMPLE else 0.0

    def handed_ahead_s(self) -> float:
        """How much render beyond the speaker's last report the capture side has already handed out, as silence
        (s; 0 when none): audio the speaker starts now would be heard there with no reference for the canceller.
        The speaker starts an answer after that much silence (SoundDeviceSink.play). Loop side, as `take()`."""
        self._absorb()
        end = self.end_s
        if self._read_s is None or end is None or self._speaker_restarted:
            return 0.0
        return max(0.0, self._read_s - end)

    def nudge(self, samples: int) -> None:
        """Hand out the render `samples` later from now on (earlier if negative): the echo was measured that much
        later behind its reference than before (audio/echo_delay.py), and the canceller learnt the old relation.
        The drift being watched moves with it, so a nudge is never taken for a gap."""
        if self._read_s is None or not samples or abs(samples) >= self._keep:
            return
        self._read_s -= samples / self.sample_rate_hz
        self._read_drift += samples / self.sample_rate_hz
        self.nudges += 1
        self.nudged.append(samples)

    def timeline(self) -> tuple[float, ...]:
        """Where the two sides stand, for the benches (NaN: not known yet): the next read position and the span the
        ring holds (s, the capture clock), the drift watched on each side (s), blocks reported, blocks waiting,
        anchors, read resyncs, underrun gaps, nudges."""
        nan = float("nan")
        return (nan if self._read_s is None else self._read_s, nan if self._start_s is None else self._start_s,
                nan if self.end_s is None else self.end_s, self._read_drift, self._write_drift, float(self.blocks),
                float(len(self._incoming)), float(self.anchors), float(self.read_resyncs),
                float(self.underflow_gaps), float(self.nudges))

    @property
    def end_s(self) -> float | None:
        """The time just after the last sample known (None before the speaker played anything)."""
        if self._start_s is None or self._ring is None:
            return None
        return self._start_s + len(self._ring) / self.sample_rate_hz

    def _absorb(self) -> None:
        import numpy as np

        from .resample import Resampler

        if self._ring is None:
            self._ring = np.zeros(0, dtype=np.int16)
        while self._incoming:
            pcm, rate, at, underflow = self._incoming.popleft()
            self.blocks += 1
            if rate != self.sample_rate_hz:
                resampler = self._resamplers.get(rate) or self._resamplers.setdefault(
                    rate, Resampler(rate, self.sample_rate_hz))
                # its first output sample belongs to input it held back from earlier blocks: that much earlier
                at -= resampler.held_input_samples / rate
                data = resampler.process(pcm)
            else:
                data = pcm
            if data:
                self._place(np.frombuffer(data, dtype=np.int16), at, underflow)
        if len(self._ring) > self._keep:
            cut = len(self._ring) - self._keep
            self._ring = self._ring[cut:]
            assert self._start_s is not None
            self._start_s += cut / self.sample_rate_hz

    def _place(self, block: np.ndarray, at: float, underflow: bool = False) -> None:
        import numpy as np

        end = self.end_s
        if underflow and end is not None:
            # the silence the device played while it ran dry is part of what was heard: without it every underrun
            # would move the render earlier than its echo for the rest of the session (measured: over a long run
            # the capture read past the end of what the speaker had reported, and the toy went uncancelled)
            gap = int(round((at - end - self._write_drift) * self.sample_rate_hz))
            if 0 < gap < self._keep:
                self._ring = np.concatenate([self._ring, np.zeros(gap, dtype=np.int16)])
                self.underflow_gaps += 1
                self.gap_ms.append(round(gap * 1000 / self.sample_rate_hz, 1))
                end = self.end_s
        if end is None or abs(at - end - self._write_drift) > self._resync_s:
            self.anchors += 1  # the speaker's timeline (re)starts here: the canceller has an echo path to learn
            if end is not None:
                self.resyncs += 1
            self._write_drift = 0.0
            self._speaker_restarted = True
            if end is not None and 0 < at - end < self._keep / self.sample_rate_hz:
                gap = int(round((at - end) * self.sample_rate_hz))  # the stream paused: silence was heard
                self._ring = np.concatenate([self._ring, np.zeros(gap, dtype=np.int16), block])
                return
            if end is not None and at < end and self._start_s is not None and at > self._start_s:
                keep = int(round((at - self._start_s) * self.sample_rate_hz))  # re-heard: the newer block wins
                self._ring = np.concatenate([cast("np.ndarray", self._ring)[:keep], block])
                return
            self._ring, self._start_s, self._write_drift = block.copy(), at, 0.0
            return
        # within the tolerance the running sample count is the clock (PortAudio's estimate jitters, and drifts);
        # the drift is only watched (see take())
        self._write_drift += _SMOOTHING * (at - end - self._write_drift)
        self._ring = np.concatenate([self._ring, block])
