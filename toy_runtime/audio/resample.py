"""Small int16 mono resampling and trimming helpers in plain numpy (no scipy).

`Resampler` is a streaming polyphase windowed-sinc resampler: capture (48 kHz → 16 kHz) feeds it block by block,
playback (22050 Hz → device rate) feeds it clause by clause, and the filter state carries across calls so block
edges do not click. `trim_leading_silence` removes the quiet start that piper puts before each sentence.
"""

from __future__ import annotations

from math import gcd

import numpy as np

__all__ = ["Resampler", "resample", "trim_leading_silence", "leading_silence_samples", "pcm_to_array"]


def pcm_to_array(pcm: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """int16 little-endian mono PCM (bytes or array) as an int16 numpy array (no copy for bytes)."""
    if isinstance(pcm, np.ndarray):
        return pcm.astype(np.int16, copy=False)
    return np.frombuffer(pcm, dtype="<i2")


class Resampler:
    """Streaming rational resampler for int16 mono PCM.

    Output sample n sits at input position n * from_hz / to_hz; it is a windowed-sinc interpolation over
    `zero_crossings` lobes each side, low-passed at the lower of the two Nyquist rates (times `rolloff`) so
    downsampling does not alias. The table holds one filter per phase (to_hz / gcd phases), so each call is a
    gather and a dot product: cheap enough for a PortAudio callback.
    """

    def __init__(self, from_hz: int, to_hz: int, *, zero_crossings: int = 16, rolloff: float = 0.94) -> None:
        if from_hz <= 0 or to_hz <= 0:
            raise ValueError("sample rates must be positive")
        self.from_hz = int(from_hz)
        self.to_hz = int(to_hz)
        g = gcd(self.from_hz, self.to_hz)
        self._up = self.to_hz // g  # L: output phases per input sample
        self._down = self.from_hz // g  # M: input samples advanced per L outputs
        self._passthrough = self.from_hz == self.to_hz
        cutoff = min(1.0, self.to_hz / self.from_hz) * rolloff  # as a fraction of the input Nyquist rate
        # Half-width in input samples: wider when downsampling, so the output-rate sinc keeps its lobes.
        self._half = int(np.ceil(zero_crossings / cutoff))
        offsets = np.arange(-self._half + 1, self._half + 1)  # input sample i = base + offset
        phases = np.arange(self._up)[:, None] / self._up  # fractional position of the output within [base, base+1)
        tau = phases - offsets[None, :]
        window = np.kaiser(2 * self._half + 1, 8.0)
        # Evaluate the Kaiser window continuously by interpolating the sampled one at tau (cheap and smooth enough).
        win = np.interp(tau, np.arange(-self._half, self._half + 1), window, left=0.0, right=0.0)
        table = cutoff * np.sinc(cutoff * tau) * win
        self._table = table.astype(np.float32)
        self._offsets = offsets
        self.reset()

    def reset(self) -> None:
        """Forget all history (start of a new, unrelated stream)."""
        # The buffer starts with `half` zeros of history so the first outputs need no special case.
        self._buf = np.zeros(self._half, dtype=np.float32)
        self._buf_start = -self._half  # global input index of self._buf[0]
        self._n_in = 0  # input samples received
        self._n_out = 0  # output samples produced

    @property
    def delay_samples(self) -> int:
        """Input samples that must arrive before an output sample can be produced (filter look-ahead)."""
        return self._half

    @property
    def held_input_samples(self) -> float:
        """Input received whose output has not been produced yet: the next output sample sits this many input
        samples before the end of what was fed (used to time-stamp the output)."""
        return self._n_in - self._n_out * self._down / self._up

    def process(self, pcm: bytes | np.ndarray) -> bytes:
        """Feed input PCM; return all output PCM that the input so far determines."""
        x = pcm_to_array(pcm)
        if self._passthrough:
            self._n_in += len(x)
            self._n_out += len(x)
            return x.tobytes()
        if len(x):
            self._buf = np.concatenate([self._buf, x.astype(np.float32)])
            self._n_in += len(x)
        return self._produce(limit=self._n_in - self._half).tobytes()

    def flush(self) -> bytes:
        """End of stream: return the remaining output (zero look-ahead), then reset."""
        if self._passthrough:
            self.reset()
            return b""
        total_out = (self._n_in * self._up + self._down - 1) // self._down
        self._buf = np.concatenate([self._buf, np.zeros(self._half + 1, dtype=np.float32)])
        out = self._produce(limit=self._n_in, max_out=total_out)
        self.reset()
        return out.tobytes()

    def _produce(self, limit: int, max_out: int | None = None) -> np.ndarray:
        # Outputs whose base input index is < limit can be computed (their look-ahead has arrived).
        # n*M // L < limit  <=>  n*M < limit*L  <=>  n < ceil(limit*L / M)
        end = -(-limit * self._up // self._down) if limit > 0 else 0
        if max_out is not None:
            end = min(end, max_out)
        if end <= self._n_out:
            return np.zeros(0, dtype=np.int16)
        n = np.arange(self._n_out, end, dtype=np.int64)
        pos = n * self._down
        base = pos // self._up
        phase = pos % self._up
        idx = (base - self._buf_start)[:, None] + self._offsets[None, :]
        y = np.einsum("ij,ij->i", self._buf[idx], self._table[phase])
        self._n_out = end
        # Drop history no longer needed by the next output.
        next_base = (end * self._down) // self._up
        keep_from = next_base - self._half + 1 - self._buf_start
        if keep_from > 0:
            self._buf = self._buf[keep_from:]
            self._buf_start += keep_from
        return np.clip(np.rint(y), -32768, 32767).astype(np.int16)


def resample(pcm: bytes | np.ndarray, from_hz: int, to_hz: int) -> bytes:
    """Resample a whole int16 mono buffer (one shot: process + flush)."""
    if from_hz == to_hz:
        return pcm_to_array(pcm).tobytes()
    r = Resampler(from_hz, to_hz)
    return r.process(pcm) + r.flush()


def leading_silence_samples(pcm: bytes | np.ndarray, *, threshold: int = 300, keep_ms: float = 5.0,
                            sample_rate_hz: int = 22050) -> int:
    """Number of samples before the first one louder than `threshold`, minus `keep_ms` of margin."""
    x = pcm_to_array(pcm)
    loud = np.flatnonzero(np.abs(x.astype(np.int32)) > threshold)
    if len(loud) == 0:
        return len(x)
    return max(0, int(loud[0]) - int(round(keep_ms * sample_rate_hz / 1000)))


def trim_leading_silence(pcm: bytes | np.ndarray, sample_rate_hz: int, *, threshold: int = 300,
                         keep_ms: float = 5.0) -> tuple[bytes, float]:
    """Cut the quiet start of a TTS clause; returns (trimmed pcm, trimmed milliseconds).

    A clause that is silent throughout is returned unchanged (it may be a deliberate pause).
    """
    x = pcm_to_array(pcm)
    n = leading_silence_samples(x, threshold=threshold, keep_ms=keep_ms, sample_rate_hz=sample_rate_hz)
    if n >= len(x):
        return x.tobytes(), 0.0
    return x[n:].tobytes(), n * 1000.0 / sample_rate_hz
