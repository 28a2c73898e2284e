"""What a listener hears: end of the user's speech and onset of the reply, found by level in a 2-channel recording.

The probe recording (`toy_runtime.testing.pulse.start_probe`) has the mic feed on the left and the speaker on the
right, on one sample clock. Levels are RMS over `window_ms` windows slid by `hop_ms`; a window is "sound" when its
level is above a threshold that sits well above the recording's noise floor. An event's time is the centre of the
window that crosses: the last sound window of the mic (end of speech), the first sound window of the speaker after
it (reply onset). Both use the same rule, so the window length cancels out of their difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["HeardTurn", "Levels", "find_turn", "levels_of", "split_probe"]

FULL_SCALE = 32768.0
SILENCE_DB = -120.0  # the level given to digital silence (log of zero)


def split_probe(pcm: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved s16le stereo → (left = mic feed, right = speaker) as int16 arrays."""
    frames = np.frombuffer(pcm[: len(pcm) // 4 * 4], dtype="<i2").reshape(-1, 2)
    return frames[:, 0], frames[:, 1]


@dataclass(frozen=True)
class Levels:
    """Sliding-window RMS levels (dBFS) of one channel: `db[i]` covers samples [i·hop, i·hop + window)."""

    db: np.ndarray
    rate: int
    window: int  # samples
    hop: int  # samples

    def centre_s(self, index: int) -> float:
        """Time (s from the recording's first sample) of window `index`'s centre."""
        return (index * self.hop + self.window / 2) / self.rate

    def index_at(self, seconds: float) -> int:
        """The first window starting at or after `seconds`."""
        return max(0, int(np.ceil(seconds * self.rate / self.hop)))

    def noise_floor_db(self, percentile: float = 5.0) -> float:
        """A low percentile of the levels: the recording is silent most of the time."""
        return float(np.percentile(self.db, percentile)) if len(self.db) else SILENCE_DB


def levels_of(samples: np.ndarray, rate: int, *, window_ms: float = 10.0, hop_ms: float = 1.0) -> Levels:
    """RMS level in dBFS of every `window_ms` window, one every `hop_ms` (cumulative sums: linear time)."""
    window = max(1, int(rate * window_ms / 1000))
    hop = max(1, int(rate * hop_ms / 1000))
    x = samples.astype(np.float64) / FULL_SCALE
    if len(x) < window:
        return Levels(np.empty(0), rate, window, hop)
    energy = np.concatenate(([0.0], np.cumsum(x * x)))
    starts = np.arange(0, len(x) - window + 1, hop)
    mean_square = (energy[starts + window] - energy[starts]) / window
    with np.errstate(divide="ignore"):
        db = 10.0 * np.log10(np.maximum(mean_square, 0.0))
    return Levels(np.maximum(db, SILENCE_DB), rate, window, hop)


@dataclass(frozen=True)
class HeardTurn:
    """One turn as heard: times in s from the recording's first sample; None when not found."""

    speech_start_s: float | None
    speech_end_s: float | None
    reply_onset_s: float | None

    @property
    def v2v_ms(self) -> float | None:
        """Reply onset − end of the user's speech."""
        if self.speech_end_s is None or self.reply_onset_s is None:
            return None
        return (self.reply_onset_s - self.speech_end_s) * 1000.0


def find_turn(mic: Levels, speaker: Levels, start_s: float, end_s: float, threshold_db: float) -> HeardTurn:
    """The user's speech and the reply's onset within [start_s, end_s) of the recording.

    Speech = the mic's sound windows in the span (first to last); the reply = the speaker's first sound window
    after the speech ended. A speaker window already sounding when the speech ends does not count as the reply:
    the onset is the first rise after it.
    """
    lo, hi = mic.index_at(start_s), min(mic.index_at(end_s), len(mic.db))
    loud = np.nonzero(mic.db[lo:hi] > threshold_db)[0]
    if len(loud) == 0:
        return HeardTurn(None, None, None)
    first, last = lo + int(loud[0]), lo + int(loud[-1])
    speech_start, speech_end = mic.centre_s(first), mic.centre_s(last)
    s_lo = speaker.index_at(speech_end)
    s_hi = min(speaker.index_at(end_s), len(speaker.db))
    sounding = speaker.db[s_lo:s_hi] > threshold_db
    rises = np.nonzero(sounding & ~np.concatenate(([True], sounding[:-1])))[0] if len(sounding) else np.empty(0, np.intp)
    if len(rises) == 0:
        return HeardTurn(speech_start, speech_end, None)
    return HeardTurn(speech_start, speech_end, speaker.centre_s(s_lo + int(rises[0])))
