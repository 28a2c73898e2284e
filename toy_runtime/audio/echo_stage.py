"""The capture front end: every mic frame, 10 ms at a time, through the echo canceller with its render frame.

`EchoCancelledSource` wraps the microphone (an `AudioSource`) and is one itself, so the listener, the wake word
and the VAD downstream hear the child without the toy's own voice. It runs on the event loop beside the VAD: two
native calls of ~30 µs per 10 ms plus the levels (~0.2 ms per 20 ms frame; 2.4–3.2 % of a core measured with noise
suppression and the gate). What it adds to the heard reply is mostly the two processors' own delay, 14 ms at 16 kHz,
not the loop (docs/benchmarks.md "Ears", fifth round): frames leave dated by it.

It also keeps the numbers that show it works: how many frames carried a reference, and the echo return loss
enhancement (ERLE, input level over output level) over frames where only the toy was sounding.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
import numpy as np

from ..ports.audio import AudioFrame, AudioSource
from ..ports.echo import FRAME_MS, EchoCanceller, LinearEchoCanceller
from .echo_delay import EchoDelayMonitor
from .echo_reference import EchoReference
from .level import SILENCE_DB
from .room_level import RoomLevel
from .wrapped_source import WrappedSource

__all__ = ["EchoCancelledSource", "EchoStats"]

_AUDIBLE_RENDER = 60.0  # RMS (int16) above which a render frame counts as the toy sounding (-55 dBFS)
# After this long with the toy silent no echo of it is left in the recognizer canceller's reach (the longest delay
# the stage measures, 400 ms, plus its 200 ms filter): the recognizer then hears AEC3's output, as without it.
_ECHO_GONE_PIECES = 60
_ROOM_AUDIBLE_MS = (10 ** (-70 / 20) * 32768) ** 2  # a room floor above -70 dBFS is refilled (mean square)


def _mean_square(samples: np.ndarray) -> float:
    return float(np.mean(samples.astype(np.float32) ** 2)) if samples.size else 0.0


class EchoStats:
    """Running counts of the front end: frames, frames with the toy sounding, and the echo removed from them."""

    def __init__(self) -> None:
        self.frames = 0
        self.render_frames = 0  # frames whose reference carried the toy's voice
        self._in_energy = 0.0  # capture energy over render frames, before and after the canceller
        self._out_energy = 0.0

    def add(self, capture_ms: float, cleaned_ms: float, render_ms: float) -> None:
        """Count one 10 ms frame, given the mean squares of what the mic heard, what came out and what played."""
        self.frames += 1
        if render_ms > _AUDIBLE_RENDER ** 2:
            self.render_frames += 1
            self._in_energy += capture_ms
            self._out_energy += cleaned_ms

    @property
    def erle_db(self) -> float | None:
        """Input over output level on frames where the toy was sounding (None before any); includes the child's
        voice when it spoke over the toy, so it is a floor of the true echo reduction."""
        if not self.render_frames or self._in_energy <= 0:
            return None
        return 10.0 * math.log10(self._in_energy / max(self._out_energy, 1e-3))


class EchoCancelledSource(WrappedSource):
    """An AudioSource: `source`'s frames with the speaker's echo removed (and noise, if the canceller does it).

    Frames keep their length; their timestamps move back by `delay_s`, the canceller's and suppressor's own delay
    (what a frame carries was captured that much before the frame it came out with). start/stop/aclose and
    relaxed delivery pass through to `source`.
    """

    def __init__(self, source: AudioSource, canceller: EchoCanceller, reference: EchoReference, *,
                 suppressor: EchoCanceller | None = None, residual_floor_dbfs: float = -50.0,
                 residual_drop_db: float = 28.0, hold_delay: bool = True,
                 recognizer_canceller: EchoCanceller | None = None) -> None:
        if canceller.sample_rate_hz != source.sample_rate_hz or reference.sample_rate_hz != source.sample_rate_hz:
            raise ValueError("the canceller, its reference and the microphone must share one sample rate")
        if suppressor is not None and suppressor.sample_rate_hz != source.sample_rate_hz:
            raise ValueError("the noise suppressor and the microphone must share one sample rate")
        super().__init__(source)
        self.canceller = canceller
        # With a separate `suppressor` (noise suppression only), frames carry two versions: `pcm` suppressed, for
        # the VAD, the wake word and the residual gate, as before; `asr_pcm` echo-cancelled only, for the
        # recognizer (through WebRTC's NS Whisper base lost 1-3 points and misheard some sentences it got right
        # without: docs/benchmarks.md, "Hearing")
        self.suppressor = suppressor
        # With a `recognizer_canceller` the recognizer's copy comes from it instead: a linear filter with no
        # residual suppressor (adapters/speex_aec.py). AEC3's suppressor, which the VAD and the own-voice check need,
        # weakened the child's first syllable over the toy ("stop" -> "up"); on the echo rig the child's words over
        # the toy went from 61 % to 81 % right, as in silence (docs/benchmarks.md, "Ears", eighth round).
        if recognizer_canceller is not None and recognizer_canceller.sample_rate_hz != source.sample_rate_hz:
            raise ValueError("the recognizer's canceller and the microphone must share one sample rate")
        self.recognizer_canceller = recognizer_canceller
        self._silence = bytes(2 * self.sample_rate_hz * FRAME_MS // 1000)
        self.reference = reference
        self.stats = EchoStats()
        self._piece = self.sample_rate_hz * FRAME_MS // 1000  # samples per canceller frame
        # The residual gate. AEC3 leaves the toy's voice at ~-85 dBFS, but the VAD still calls ~20 % of those
        # frames speech, and ~1 % come out near -45 dBFS: enough for a false barge-in now and then. While the toy
        # is sounding, a cleaned frame below the floor, or `residual_drop_db` below what the mic heard (the
        # canceller removed nearly all of it: it was echo), becomes silence. Measured on the echo rig: the child
        # speaking over the toy came out at -26 dBFS (p50) and at most 21 dB below the mic (p10); echo-only
        # frames at -96 dBFS (p50) and 32 dB or more below the mic (p90).
        self._floor = (10 ** (residual_floor_dbfs / 20) * 32768) ** 2  # mean-square
        self._drop = 10 ** (-residual_drop_db / 10)
        self.gated = 0  # 10 ms frames turned to silence by the residual gate
        # The echo comes back up to ~300 ms after its reference (the room, the device's buffers, what the
        # canceller's delay estimate absorbs): the toy counts as sounding while any render frame that recent was.
        self._recent_render: deque[float] = deque(maxlen=30)
        # the last 0.8 s of render frames and of what the listener got, for echo_likeness()
        self._history_render: deque[bytes] = deque(maxlen=80)
        self._history_out: deque[bytes] = deque(maxlen=80)
        # A jump in the render's timeline (a speaker underrun's silence placed by its DAC time, a re-anchor, lost
        # capture) moves the echo against its reference: AEC3 re-learns it in 1-2 s and leaks meanwhile. On the
        # busy rig every false barge-in left came within a second of one (docs/benchmarks.md, "Ears"): the
        # own-voice check is stricter until `disturbed_s` after the last one.
        self.disturbed_s = 2.5
        self._disturbances = 0
        self._disturbed_until = float("-inf")
        # Until the canceller has heard the toy `learn_s` in all it has no echo path yet, and what leaks then
        # does not look like the render: AEC3's suppressor and the noise suppressor reshape it (a leak in the first
        # second of `run`'s first answer scored 0.11 over 320 ms, below children over the toy, up to 0.23). The
        # own-voice check lets nothing interrupt until then (`learning()`): the first 2.5 s the toy ever says.
        self.learn_s = 2.5
        self._heard_s = 0.0  # audible render so far, in seconds
        self._now = float("-inf")  # the capture time of the last frame cleaned
        # the echo's delay behind the render, measured and held where the canceller learnt it (audio/echo_delay.py)
        self.delay_monitor = EchoDelayMonitor(self.sample_rate_hz) if hold_delay and canceller.cancels_echo else None
        # What comes out is the algorithms' delay late (AEC3's blocks, the suppressor's overlap: 14 ms at 16 kHz).
        # Frames leave dated by what they carry, so the end of speech is placed where the child stopped and the
        # logged latency includes the delay (docs/benchmarks.md, "Ears", fifth round).
        delay = canceller.delay_samples + (suppressor.delay_samples if suppressor is not None else 0)
        self.delay_s = delay / self.sample_rate_hz
        # a frame whose render the speaker has not reported yet waits for it, this long at most
        self.render_wait_s = 0.04
        self.render_waits = 0  # frames that waited
        self.render_waited_s = 0.0  # …and for how long in all
        # a linear recognizer canceller gets its render this much before the echo measured: the onset is in its filter
        self.lead_margin_ms = 20
        self._lead_from = self.delay_monitor if isinstance(recognizer_canceller, LinearEchoCanceller) else None
        self._led_for: int | None = None  # the measured delay the lead was last set from
        self._quiet_pieces = _ECHO_GONE_PIECES  # 10 ms pieces since the toy last sounded (none yet: long ago)
        # The room, refilled. AEC3's suppressor takes the room down with the echo at each of the toy's words (a fan
        # at -42 dBFS came out at -55) and the gate made such pieces digital silence; between words the fan came
        # back, and the VAD took the fan keyed at the toy's syllables for speech (71 false barge-ins in 51 answers
        # beside a fan on the rig, half the children over the toy missed). While the toy sounds, a piece under the
        # room's floor, or gated, becomes a piece of the room as heard while the toy was silent (`room_fill`); a
        # silent room (under -70 dBFS) stays gated to digital silence (docs/benchmarks.md, "Ears", ninth round).
        self.room_fill = True
        self._room_floor_ms = 0.0  # the room's level with the toy silent (mean square; 0: not heard yet)
        self._room: deque[bytes] = deque(maxlen=50)  # its last half second at that level
        # While the toy sounds, speech must be `barge_in_margin_db` louder than the room's usual level (learnt from
        # the frames with the toy silent): beside a fan or among talkers the VAD took the room for speech while the
        # toy talked, and interrupted it (audio/room_level.py). None: the VAD alone decides.
        self.barge_in_margin_db: float | None = 12.0
        self.room_level = RoomLevel()
        # the linear copy waits this long, so it comes out as late as AEC3's (8 ms): one moment per frame
        self._linear_line = bytearray(2 * max(0, canceller.delay_samples - (
            recognizer_canceller.delay_samples if recognizer_canceller is not None else 0)))

    def _frame(self, frame: AudioFrame) -> AudioFrame:
        return self.clean(frame)

    async def _before(self, frame: AudioFrame) -> None:
        await self.await_render(len(frame.pcm) // 2)

    async def await_render(self, samples: int) -> None:
        """Wait (at most `render_wait_s`) until the speaker has reported the render this frame is cleaned with:
        handed silence instead, AEC3 would leak the toy's voice then and learn a false path (EchoReference
        .missing_s). Nothing waits while the speaker's output buffer holds more than a frame."""
        if not self.canceller.cancels_echo or not self.reference.missing_s(samples):
            return
        started = time.monotonic()
        self.render_waits += 1
        while self.reference.missing_s(samples) and time.monotonic() - started < self.render_wait_s:
            await asyncio.sleep(0.002)
        self.render_waited_s += time.monotonic() - started

    def clean(self, frame: AudioFrame) -> AudioFrame:
        """One captured frame through the canceller, 10 ms at a time, each with the render of its moment."""
        n = self._piece
        pcm = frame.pcm
        if len(pcm) % (2 * n):
            return frame  # not whole 10 ms pieces (a device that never does this): left as it is, never cut
        out = bytearray()
        # the recognizer's copy: echo-cancelled only (not suppressed, not gated: see the residual gate below)
        for_asr = (bytearray() if self.suppressor is not None or self.canceller.cancels_echo
                   or self.recognizer_canceller is not None else None)
        gated_before = self.gated
        self._now = frame.timestamp_s
        frame_sounded = False
        frame_ms = 0.0  # the sum of the pieces' mean squares
        for i in range(0, len(pcm), 2 * n):
            capture = pcm[i : i + 2 * n]
            render = self.reference.take(frame.timestamp_s + i / 2 / self.sample_rate_hz, n,
                                         None if frame.first_sample is None else frame.first_sample + i // 2)
            echo_free = self.canceller.process(capture, render)
            if self.delay_monitor is not None and (shift := self.delay_monitor.add(capture, render)):
                self.reference.nudge(shift)
            if self._lead_from is not None and self._lead_from.delay_samples != self._led_for:
                self._lead_recognizer_canceller(self._lead_from.delay_samples)
            cleaned = echo_free if self.suppressor is None else self.suppressor.process(echo_free, self._silence)
            # each level once per piece: this runs on the loop for every 10 ms of audio
            raw_ms = _mean_square(np.frombuffer(capture, np.int16))
            out_ms = _mean_square(np.frombuffer(cleaned, np.int16))
            ref_ms = _mean_square(np.frombuffer(render, np.int16))
            self._recent_render.append(ref_ms)
            if ref_ms > _AUDIBLE_RENDER ** 2:
                self._heard_s += FRAME_MS / 1000
            sounding = max(self._recent_render) > _AUDIBLE_RENDER ** 2
            frame_sounded = frame_sounded or sounding
            if not sounding and self.room_fill and self.canceller.cancels_echo:
                self._learn_room(cleaned, out_ms)
            if self.canceller.cancels_echo and sounding:
                if out_ms < self._room_floor_ms and self._room_heard():
                    cleaned, out_ms = self._room_piece(cleaned, out_ms)
                elif out_ms < self._floor or out_ms < self._drop * raw_ms:
                    # The VAD's copy only. The recognizer hears an utterance the VAD opened, pre-roll included, and
                    # the child's first sound over the toy is soft against the echo the mic heard: gated with the
                    # rest, Whisper heard "stop talking please" over an answer as "up talking please" and
                    # "goodbye" as "bye" (docs/benchmarks.md, "Ears", seventh round). AEC3's residue is ~-85 dBFS.
                    cleaned, out_ms = self._room_piece(bytes(len(cleaned)), 0.0)
                    self.gated += 1
            self.stats.add(raw_ms, out_ms, ref_ms)
            frame_ms += out_ms
            self._history_render.append(render)
            self._history_out.append(cleaned)
            out += cleaned
            if for_asr is not None:
                for_asr += echo_free if self.recognizer_canceller is None else self._linear_copy(
                    capture, render, ref_ms, echo_free)
        ref = self.reference  # once per frame, not per 10 ms piece: this runs on the loop for every frame
        disturbances = ref.underflow_gaps + ref.anchors + ref.read_resyncs + ref.capture_gaps + ref.nudges
        if disturbances != self._disturbances:
            self._disturbances = disturbances
            self._disturbed_until = frame.timestamp_s + self.disturbed_s
        # a second copy only when it differs from the VAD's (suppressed, or a piece gated): most frames have one
        differs = for_asr is not None and (self.suppressor is not None or self.recognizer_canceller is not None
                                           or self.gated != gated_before)
        return AudioFrame(bytes(out), frame.sample_rate_hz, frame.timestamp_s - self.delay_s,
                          bytes(for_asr) if differs and for_asr is not None else None,
                          speech_floor_db=self._speech_floor(frame_sounded, frame_ms / (len(pcm) // (2 * n))))

    def _speech_floor(self, sounding: bool, mean_square: float) -> float | None:
        """The frame's speech floor (`AudioFrame.speech_floor_db`): the room's level plus the margin while the toy
        sounds and the room has been heard; a frame with the toy silent teaches the room's level instead."""
        if self.barge_in_margin_db is None or not self.canceller.cancels_echo:
            return None
        if not sounding:
            level = 10.0 * math.log10(mean_square / 32768.0**2) if mean_square > 0 else SILENCE_DB
            self.room_level.hear(max(SILENCE_DB, level))
            return None
        return self.room_level.floor_db(self.barge_in_margin_db)

    def _learn_room(self, piece: bytes, level_ms: float) -> None:
        """While the toy is silent: the room's floor (follows a quieter piece at once, a louder one by ~0.5 dB/s) and
        the last pieces at it (within 3 dB: the room itself, not somebody talking in it)."""
        self._room_floor_ms = min(level_ms, self._room_floor_ms * 1.0012) if self._room_floor_ms else level_ms
        if level_ms <= 2.0 * self._room_floor_ms:
            self._room.append(piece)

    def _room_heard(self) -> bool:
        """The room has a floor worth refilling (a silent room is gated to digital silence)."""
        return self.room_fill and bool(self._room) and self._room_floor_ms >= _ROOM_AUDIBLE_MS

    def _room_piece(self, piece: bytes, level_ms: float) -> tuple[bytes, float]:
        """What a gated or over-suppressed piece becomes: the room as heard with the toy silent, when it has a floor
        worth hearing; else `piece`."""
        if not self._room_heard():
            return piece, level_ms
        self._room.rotate(-1)
        fill = self._room[0]
        return fill, _mean_square(np.frombuffer(fill, np.int16))

    def _linear_copy(self, capture: bytes, render: bytes, render_ms: float, echo_free: bytes) -> bytes:
        """The recognizer's piece from the linear canceller, fed every piece so it stays converged, and delayed to
        match AEC3's output, so the two copies carry the same moment; but once the toy has been silent longer than
        any echo lasts, AEC3's piece, as before. With no echo, Whisper heard the rig's espeak "can you tell me" as
        nothing at 5 of 16 alignments from the raw mic or MDF's copy, 0 from AEC3's (its high-pass and shaping),
        and `run` then cut the child off in the pause after it (4 of 12 busy runs of tests/hil/test_turn_taking.py)."""
        assert self.recognizer_canceller is not None
        self._linear_line += self.recognizer_canceller.process(capture, render)
        cleaned = bytes(self._linear_line[: len(capture)])
        del self._linear_line[: len(capture)]
        self._quiet_pieces = 0 if render_ms > _AUDIBLE_RENDER ** 2 else self._quiet_pieces + 1
        return echo_free if self._quiet_pieces >= _ECHO_GONE_PIECES else cleaned

    def _lead_recognizer_canceller(self, delay: int | None) -> None:
        """Give the linear recognizer canceller the render `lead_margin_ms` before the echo the stage measured
        (`delay`, samples), so its filter spans the echo's onset and tail; until the first estimate it covers
        0..its filter length."""
        assert isinstance(self.recognizer_canceller, LinearEchoCanceller)
        self._led_for = delay
        if delay is not None:
            self.recognizer_canceller.set_render_lead(
                max(0, delay - self.lead_margin_ms * self.sample_rate_hz // 1000))

    def recently_disturbed(self) -> bool:
        """True within `disturbed_s` of a jump in the render's timeline: the canceller may be leaking the toy."""
        return self._now < self._disturbed_until

    def learning(self) -> bool:
        """True until the canceller has heard the toy `learn_s` in all: it has not learnt the echo path yet, and
        nothing it lets through can be told from the toy's own voice."""
        return self.canceller.cancels_echo and self._heard_s < self.learn_s

    def echo_likeness(self, window_s: float = 0.16, max_lag_s: float = 0.45) -> float:
        """How much the last `window_s` the listener heard looks like what the toy played up to `max_lag_s` before:
        the peak normalized cross-correlation, 0 (the child, or silence) … 1 (the toy's own voice, leaked).

        The canceller re-learns the echo after the path jumps (a device underrun, a dropped capture block): for a
        second or so its output then carries the toy's voice loudly enough for the VAD. A classic double-talk
        detector tells the two apart, imperfectly at a speech start (60 ms of speech in a 160 ms window), better
        over a longer one: audio/own_voice.py decides with both. Called once or twice per speech start while the
        toy sounds (two small FFTs)."""
        pieces = int(window_s * 1000 / FRAME_MS)
        heard = np.frombuffer(b"".join(list(self._history_out)[-pieces:]), np.int16).astype(np.float64)
        played = np.frombuffer(b"".join(self._history_render), np.int16).astype(np.float64)
        if not heard.any() or not played.any():
            return 0.0
        n = len(heard)
        reach = min(len(played) - n, int(max_lag_s * self.sample_rate_hz))
        if reach <= 0:
            return 0.0
        segment = played[-(n + reach):]  # the render from (reach + n) samples ago up to now
        size = 1 << int(np.ceil(np.log2(len(segment) + n)))
        corr = np.fft.irfft(np.fft.rfft(segment, size) * np.conj(np.fft.rfft(heard, size)), size)[: reach + 1]
        # the energy of each render slice the heard window is compared with
        energy = np.convolve(segment**2, np.ones(n), mode="valid")[: reach + 1]
        # A silent render slice says nothing: its correlation is the FFT's rounding noise (~1e-6), and divided by
        # a zero energy it scored 560 on the rig, so a child who spoke as the toy paused was taken for the toy.
        audible = energy > n * _AUDIBLE_RENDER**2 / 100  # the slice's mean level above -75 dBFS
        scores = np.where(audible, np.abs(corr) / (np.sqrt(energy * np.dot(heard, heard)) + 1e-9), 0.0)
        return float(min(np.max(scores), 1.0)) if scores.size else 0.0

    def describe(self) -> str:
        """The canceller's line plus whether the reference is arriving."""
        fed = "reference fed" if self.reference.blocks else "no reference yet"
        erle = self.stats.erle_db
        line = self.canceller.describe()
        if self.suppressor is not None:
            line = (line.replace(", noise suppression: off", "")
                    + ", noise suppression: on (the recognizer hears it before)")
        if self.recognizer_canceller is not None:
            heard = self.recognizer_canceller.describe().replace("echo cancellation: ", "")
            line += f"; the recognizer hears {heard}"
        return f"{line} ({fed}" + (f", {erle:.0f} dB removed)" if erle is not None else ")")
