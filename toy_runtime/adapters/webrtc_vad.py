"""Voice activity detection with the WebRTC VAD (the `webrtcvad-wheels` package)."""

from __future__ import annotations

from typing import Any

from toy_runtime.ports.audio import AudioFrame

__all__ = ["WebRtcVad"]

_RATES = (8000, 16000, 32000, 48000)


class WebRtcVad:
    """WebRTC VAD per frame. `aggressiveness` 0 (lenient) .. 3 (strict about what counts as speech).

    WebRTC accepts 10, 20 or 30 ms frames at 8/16/32/48 kHz; other frame lengths are split into 10 ms pieces and
    count as speech when at least half of the pieces are.
    """

    def __init__(self, aggressiveness: int = 2) -> None:
        if aggressiveness not in (0, 1, 2, 3):
            raise ValueError("aggressiveness must be 0..3")
        try:
            import webrtcvad
        except ImportError as exc:
            raise ImportError(f"webrtcvad is not installed (pip install webrtcvad-wheels): {exc}") from exc
        self._vad: Any = webrtcvad.Vad(aggressiveness)
        self.aggressiveness = aggressiveness

    def is_speech(self, frame: AudioFrame) -> bool:
        """True if the frame contains speech."""
        rate = frame.sample_rate_hz
        if rate not in _RATES:
            raise ValueError(f"WebRTC VAD needs 8/16/32/48 kHz audio, got {rate} Hz")
        samples = frame.samples
        if samples * 1000 in (10 * rate, 20 * rate, 30 * rate):
            return bool(self._vad.is_speech(frame.pcm, rate))
        step = rate // 100  # 10 ms
        pieces = [frame.pcm[i * 2 : (i + step) * 2] for i in range(0, samples - step + 1, step)]
        if not pieces:
            return False
        votes = sum(bool(self._vad.is_speech(p, rate)) for p in pieces)
        return votes * 2 >= len(pieces)
