"""Shared PortAudio plumbing for the sounddevice mic and speaker: lazy import, device lookup, rate fallback."""

from __future__ import annotations

from typing import Any

from toy_runtime.ports.audio import AudioDeviceError

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
