"""WAV files as a microphone and as a speaker: replays, the `demo` command, and tests without a sound card."""

from __future__ import annotations

import re
import wave
from pathlib import Path
from typing import Any, Callable

import numpy as np

from toy_runtime.audio.pcm_io import PcmSource, RecordingSink
from toy_runtime.audio.resample import resample
from toy_runtime.ports.audio import AudioDeviceError

__all__ = ["WavFileSource", "WavFileSink", "read_wav", "write_wav"]


def read_wav(path: str | Path) -> tuple[bytes, int]:
    """(int16 mono PCM, rate) from a 16-bit PCM WAV file; multi-channel files are averaged to mono."""
    try:
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() != 2:
                raise AudioDeviceError("wav-format", f"{path}: only 16-bit PCM WAV is supported")
            rate, channels = w.getframerate(), w.getnchannels()
            data = w.readframes(w.getnframes())
    except (OSError, wave.Error, EOFError) as exc:
        raise AudioDeviceError("wav-unreadable", f"cannot read {path}: {exc}") from exc
    if channels > 1:
        x = np.frombuffer(data, dtype="<i2").reshape(-1, channels).astype(np.int32).mean(axis=1)
        data = x.astype("<i2").tobytes()
    return data, rate


def write_wav(path: str | Path, pcm: bytes, sample_rate_hz: int) -> Path:
    """Write int16 mono PCM as a WAV file (parent directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate_hz)
        w.writeframes(pcm)
    return path


class WavFileSource(PcmSource):
    """An AudioSource that replays a WAV file as 16 kHz mono frames.

    `realtime=True` paces frames like a live mic (source times are wall times); False delivers them as fast as
    they are consumed. `lead_silence_ms` / `tail_silence_ms` add silence around the file (a recording that ends
    right at the last word needs a tail so the endpointer's hangover can close the utterance).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        sample_rate_hz: int = 16000,
        frame_ms: int = 20,
        realtime: bool = False,
        lead_silence_ms: int = 0,
        tail_silence_ms: int = 0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        pcm, rate = read_wav(path)
        kwargs = {"clock": clock} if clock is not None else {}
        super().__init__(
            pcm,
            rate,
            sample_rate_hz=sample_rate_hz,
            frame_ms=frame_ms,
            realtime=realtime,
            lead_silence_ms=lead_silence_ms,
            tail_silence_ms=tail_silence_ms,
            **kwargs,
        )
        self.path = Path(path)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class WavFileSink(RecordingSink):
    """An AudioSink that writes each answer to `<out_dir>/<prefix><answer_id>.wav` (at the first chunk's rate,
    or `sample_rate_hz` if given). Files are (re)written on `drain()` and `aclose()`; `files` maps answer ids to
    paths. `realtime=True` paces playback like a speaker (see RecordingSink).
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        sample_rate_hz: int | None = None,
        prefix: str = "",
        realtime: bool = False,
        clock: Callable[[], float] | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
        super().__init__(sample_rate_hz, realtime=realtime, **kwargs)
        self.out_dir = Path(out_dir)
        self.prefix = prefix
        self.files: dict[str, Path] = {}

    async def drain(self) -> None:
        """Wait for the queue (real-time mode) and write the answers' files."""
        await super().drain()
        self.write_files()

    async def aclose(self) -> None:
        """Write the files and close."""
        try:
            if not self.closed and self.started:
                self.write_files()
        finally:
            await super().aclose()

    def write_files(self) -> dict[str, Path]:
        """Write one WAV per answer from what has been played so far."""
        for answer_id in self.answer_ids():
            chunks = [c for c in self.chunks if c.answer_id == answer_id]
            rate = chunks[0].sample_rate_hz
            pcm = b"".join(c.pcm if c.sample_rate_hz == rate else resample(c.pcm, c.sample_rate_hz, rate)
                           for c in chunks)
            name = _UNSAFE.sub("_", f"{self.prefix}{answer_id or 'answer'}") + ".wav"
            self.files[answer_id] = write_wav(self.out_dir / name, pcm, rate)
        return dict(self.files)
