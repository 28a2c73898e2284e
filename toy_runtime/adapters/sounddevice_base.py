"""Shared PortAudio plumbing for the sounddevice mic and speaker: lazy import, device lookup, rate fallback, and
re-reading PortAudio's device list after a device went away.

PortAudio reads its device list once, at initialisation. A USB device that is pulled and plugged back in comes
back as a new ALSA card ("… (hw:2,0)" instead of "(hw:1,0)"), which the old list never shows: a mic re-opened
against it fails forever. So when a device cannot be found or opened, `open_device` re-initialises PortAudio and
tries once more — but only while no stream of this process is open (Pa_Terminate closes every open stream), which
is why the mic and the speaker open and close their streams through here and share one count. A stream whose close
was abandoned (audio/recovery.py gives up on a close that hangs) stays counted, so the list is then not re-read:
the mic keeps retrying, the service watchdog is withheld, and systemd restarts the toy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from typing import Any, Callable

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


class _Streams:
    """Open PortAudio streams of this process; opening and re-initialising are serialised by `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.refreshes = 0  # how often the device list was re-read (for tests and logs)


_streams = _Streams()


def device_list_refreshes() -> int:
    """How many times this process re-initialised PortAudio to re-read its device list."""
    return _streams.refreshes


def _refresh_device_list(sd: Any) -> bool:
    # Caller holds _streams.lock. sounddevice has no public re-scan; _terminate/_initialize are its own
    # (stable since 0.3) pair around Pa_Terminate/Pa_Initialize.
    if _streams.open or not (hasattr(sd, "_terminate") and hasattr(sd, "_initialize")):
        return False
    sd._terminate()
    sd._initialize()
    _streams.refreshes += 1
    log.debug("re-read PortAudio's device list (%d devices)", len(sd.query_devices()))
    return True


def open_device(sd: Any, device: int | str | None, kind: str, open_on: Callable[[dict], Any]) -> Any:
    """`open_on(info)` for the device's current info → an open stream, counted until `close_stream`.

    If the device is not found or does not open, PortAudio's device list is re-read (when no other stream of
    this process is open) and it is tried once more: a replugged or newly plugged device is found by its name.
    """
    with _streams.lock:
        try:
            stream = open_on(resolve_device(sd, device, kind))
        except AudioDeviceError as exc:
            if exc.code not in ("device-not-found", "device-open-failed") or not _refresh_device_list(sd):
                raise
            stream = open_on(resolve_device(sd, device, kind))
        _streams.open += 1
        return stream


def close_stream(stream: Any) -> None:
    """Abort (drop buffers, do not wait for them to play) and close a stream opened by `open_device`."""
    try:
        stream.abort()
    finally:
        try:
            stream.close()
        finally:
            with _streams.lock:
                _streams.open = max(0, _streams.open - 1)


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
