"""The earcon: a short rising two-note chime that tells the child the toy heard its wake word and is listening."""

from __future__ import annotations

import numpy as np

__all__ = ["earcon_pcm"]


def earcon_pcm(sample_rate_hz: int = 16000, *, level_dbfs: float = -18.0) -> bytes:
    """~150 ms of int16 mono PCM: two soft notes (a fifth apart, rising), faded in and out so they never click."""
    notes = ((660.0, 0.07), (990.0, 0.08))
    amplitude = 32767 * 10 ** (level_dbfs / 20)
    parts = []
    for freq, seconds in notes:
        t = np.arange(int(seconds * sample_rate_hz)) / sample_rate_hz
        envelope = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.01)  # 10 ms ramps
        parts.append(np.sin(2 * np.pi * freq * t) * envelope * amplitude)
    return np.concatenate(parts).astype(np.int16).tobytes()
