"""Mic and speaker through PortAudio (the `sounddevice` package), and the device list for `toy-runtime devices`.

The mic is SoundDeviceSource (sounddevice_mic.py), the speaker SoundDeviceSink (sounddevice_speaker.py); both import
sounddevice lazily and turn PortAudio errors into AudioDeviceError.
"""

from __future__ import annotations

from dataclasses import dataclass

from toy_runtime.adapters.sounddevice_base import import_sounddevice
from toy_runtime.adapters.sounddevice_mic import SoundDeviceSource
from toy_runtime.adapters.sounddevice_speaker import SoundDeviceSink

__all__ = ["SoundDeviceSource", "SoundDeviceSink", "DeviceInfo", "list_devices"]


@dataclass(frozen=True)
class DeviceInfo:
    """One PortAudio device as `toy-runtime devices` shows it."""

    index: int
    name: str
    hostapi: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: float


def list_devices() -> list[DeviceInfo]:
    """All PortAudio devices with their index, name, host API, channel counts and default rate."""
    sd = import_sounddevice()
    apis = sd.query_hostapis()
    return [
        DeviceInfo(
            index=int(d["index"]),
            name=str(d["name"]),
            hostapi=str(apis[d["hostapi"]]["name"]),
            max_input_channels=int(d["max_input_channels"]),
            max_output_channels=int(d["max_output_channels"]),
            default_samplerate=float(d["default_samplerate"]),
        )
        for d in sd.query_devices()
    ]
