"""Shared PortAudio plumbing for the sounddevice mic and speaker: lazy import, device lookup, rate fallback."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from typing import Any

from toy_runtime.ports.audio import AudioDeviceError

log = logging.getLogger(__name__)

_INSTALL_HINT = "sounddevice is not installed (pip install sounddevice; apt install libportaudio2)"


def import_sounddevice() -> Any:
    """The sounddevice module, or AudioDeviceError("sounddevice-missing") with the install hint."""
    try:
        import sounddevice
    except (ImportError, OSError) as exc:  # OSError: the PortAudio library itself is missing
        raise AudioDeviceError("sounddevice-missing", f"{_INSTALL_HINT}: {exc}") from exc
    return sounddevice


def resolve_device(sd: Any, device: int | str | None, kind: str) -> dict:
    """PortAudio's info for an index, a name substring or None (the default), as a dict with "index"."""
    try:
        return dict(sd.query_devices(device, kind=kind))
    except (ValueError, sd.PortAudioError) as exc:
        raise AudioDeviceError("device-not-found", f"no {kind} device {device!r}: {exc}") from exc


def device_rate(sd: Any, info: dict, wanted: int, kind: str) -> int:
    """`wanted` if the device accepts it, else the device's default rate (we resample)."""
    check = sd.check_input_settings if kind == "input" else sd.check_output_settings
    try:
        check(device=info["index"], channels=1, dtype="int16", samplerate=wanted)
        return wanted
    except (ValueError, sd.PortAudioError):
        return int(info["default_samplerate"])


def open_raw_stream(sd: Any, kind: str, info: dict, *, rate: int, blocksize: int, latency: Any, callback: Any,
                    finished_callback: Any) -> Any:
    """A mono int16 RawInputStream/RawOutputStream on `info`'s device; AudioDeviceError("device-open-failed")."""
    stream_type = sd.RawInputStream if kind == "input" else sd.RawOutputStream
    try:
        return stream_type(samplerate=rate, blocksize=blocksize, device=info["index"], channels=1, dtype="int16",
                           latency=latency, callback=callback, finished_callback=finished_callback)
    except sd.PortAudioError as exc:
        raise AudioDeviceError("device-open-failed", f"cannot open {kind} {info['name']!r}: {exc}") from exc


def close_stream(stream: Any) -> None:
    """Abort (drop buffers, do not wait for them to play) and close a stream."""
    try:
        stream.abort()
    finally:
        stream.close()


class AlsaErrors:
    """alsa-lib's error messages, counted instead of printed.

    PortAudio's ALSA backend recovers every xrun with `snd_pcm_recover()`, and alsa-lib then writes
    "ALSA lib pcm.c:…:(snd_pcm_recover) underrun occurred" to stderr from C, once per event (dozens per run on a
    loaded machine). `install()` replaces alsa-lib's handler (`snd_lib_error_set_handler`, process-wide) with one
    that counts: xruns by the reporting function, everything else as `other` (the first of those is still logged).
    The speaker reports the count once, when it closes.
    """

    def __init__(self) -> None:
        self.xruns = 0
        self.other = 0
        self._lock = threading.Lock()
        self._handler: Any = None  # the ctypes callback: kept alive as long as alsa-lib may call it

    def install(self) -> bool:
        """Install the counting handler (idempotent). False without libasound (then nothing changes)."""
        if self._handler is not None:
            return True
        name = ctypes.util.find_library("asound")
        if name is None:
            return False
        try:
            lib = ctypes.CDLL(name)
            # void handler(const char *file, int line, const char *function, int err, const char *fmt, ...):
            # the variadic rest is never read, so declaring the fixed part is enough on the C ABIs we run on
            proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                     ctypes.c_char_p)
            handler = proto(self._on_error)
            lib.snd_lib_error_set_handler(handler)
        except (OSError, AttributeError):
            return False
        self._handler = handler
        return True

    def _on_error(self, file: bytes | None, line: int, function: bytes | None, err: int, fmt: bytes | None) -> None:
        with self._lock:
            if function == b"snd_pcm_recover":
                self.xruns += 1
                return
            self.other += 1
            first = self.other == 1
        if first:
            log.warning("ALSA: %s in %s (%s:%d); further ALSA messages are counted, not printed",
                        (fmt or b"").decode(errors="replace"), (function or b"?").decode(errors="replace"),
                        (file or b"?").decode(errors="replace"), line)


ALSA_ERRORS = AlsaErrors()
