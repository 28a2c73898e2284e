"""The RMS level of a PCM frame in dBFS, cheap enough for every captured frame (no numpy on the listening path)."""

from __future__ import annotations

import math
import operator
import sys
from array import array

__all__ = ["SILENCE_DB", "level_db"]

SILENCE_DB = -96.0  # digital silence (and anything below one LSB of int16) is reported as this level


def level_db(pcm: bytes, *, stride: int = 2) -> float:
    """RMS level of signed 16-bit little-endian mono `pcm` relative to full scale (32768), at least SILENCE_DB.

    Every `stride`-th sample is used: the mean square of a 20 ms frame is estimated as well from half its samples
    (within ~1 dB on speech), at a third of the cost (~15 µs per frame, run for every captured frame)."""
    samples = array("h")
    samples.frombytes(pcm[: len(pcm) // 2 * 2])
    if sys.byteorder != "little":
        samples.byteswap()
    samples = samples[::stride]
    if not samples:
        return SILENCE_DB
    mean_square = sum(map(operator.mul, samples, samples)) / len(samples)
    if mean_square <= 0:
        return SILENCE_DB
    return max(SILENCE_DB, 10.0 * math.log10(mean_square / (32768.0 * 32768.0)))
