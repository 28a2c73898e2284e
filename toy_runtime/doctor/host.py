"""Checks of the box itself: the state directory, the audio devices and the ALSA mixer control."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..app.disk_space import free_bytes, human_bytes
from ..config import Settings
from .verdict import Verdict, fail, in_thread, ok, skip, warn

log = logging.getLogger(__name__)

MIN_FREE_MB = 200
FIRST_FRAME_TIMEOUT_S = 2.0


# -- disk --------------------------------------------------------------------------------------------------


def _probe_dir(directory: Path) -> int:
    """Create, fsync and delete a file in `directory` (made if missing); returns the free bytes there."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".doctor-", dir=directory)
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)  # what the calendar store and the audit log rely on
    finally:
        os.close(fd)
        os.unlink(name)
    return shutil.disk_usage(directory).free


async def check_state_dir(settings: Settings, *, min_free_mb: int = MIN_FREE_MB) -> Verdict:
    """The state directory and the audit/calendar directories are writable; enough free space."""
    keys = {settings.state_dir: "state_dir"}
    for key, extra in ([("audit.path", settings.audit_path.parent)] if settings.audit.enabled else []) + \
            [("calendar.path", settings.calendar_path.parent)]:
        keys.setdefault(extra, key)
    dirs = list(keys)
    free: dict[Path, int] = {}
    for directory in dirs:
        try:
            free[directory] = await in_thread(_probe_dir, directory, name="doctor:state-dir")
        except OSError as exc:
            room = ""
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # how full it is says what to free
                left = free_bytes(directory)
                room = f" ({human_bytes(left)} free)" if left is not None else ""
            return fail(f"{keys[directory]}: {directory}: not writable: {exc.strerror or exc}{room}",
                        "free space there, or create it writable for the service user (systemd: "
                        "StateDirectory=toy-runtime), or point state_dir / TOY_STATE_DIR (audit.path, calendar.path) "
                        "at a writable directory")
    low = {d: b for d, b in free.items() if b < min_free_mb * 1024 * 1024}
    also = f" (also {', '.join(str(d) for d in dirs[1:])})" if len(dirs) > 1 else ""
    if low:
        where, bytes_free = next(iter(low.items()))
        return warn(f"{where}: only {bytes_free // (1024 * 1024)} MB free",
                    f"free at least {min_free_mb} MB: the audit log and the calendar grow there "
                    "(rotate or trim audit.jsonl)")
    return ok(f"{dirs[0]} writable, {free[dirs[0]] / 1024 ** 3:.1f} GB free{also}")


# -- audio devices ---------------------------------------------------------------------------------------


def _device_list_hint(kind: str) -> str | None:
    """Names of the devices PortAudio sees for `kind` ("input"/"output"), or None when it sees none."""
    try:
        from ..adapters.sounddevice_io import list_devices

        devices = list_devices()
    except Exception as exc:  # PortAudio itself is the problem: the caller's message already says so
        log.debug("listing the audio devices failed: %s: %s", type(exc).__name__, exc)
        return None
    key = "max_input_channels" if kind == "input" else "max_output_channels"
    usable = [d for d in devices if getattr(d, key) > 0]
    if not usable:
        return None
    shown = ", ".join(f"{d.index} {d.name!r}" for d in usable[:6]) + (" …" if len(usable) > 6 else "")
    return shown


def _audio_failure(exc: Exception, kind: str, device: Any) -> Verdict:
    code = getattr(exc, "code", "")
    message = getattr(exc, "message", None) or str(exc)
    key = f"audio.{kind}_device"
    if code == "sounddevice-missing":
        return fail(f"PortAudio is not available: {message}",
                    "apt-get install libportaudio2 (and pip install sounddevice)")
    if code == "device-not-found":
        listed = _device_list_hint(kind)
        if listed is None:
            wanted = f" (wanted {device!r})" if device is not None else ""
            tool = "arecord" if kind == "input" else "aplay"
            return fail(f"no {kind} device: PortAudio sees none{wanted}",
                        f"plug in the USB {'mic' if kind == 'input' else 'speaker'} (check `{tool} -l`), "
                        "or start PulseAudio / set PULSE_SERVER; then `toy-runtime devices`")
        return fail(message, f"set {key} to one of: {listed} (see `toy-runtime devices`)")
    if code == "device-open-failed":
        return fail(message, "the device is busy or refuses mono 16-bit audio: stop other users (`fuser -v "
                    "/dev/snd/*`; is the toy-runtime service running?), or use the `pulse`/`default` device")
    return fail(f"{type(exc).__name__}: {message}", f"check {key} (`toy-runtime devices`)")


async def check_audio_input(settings: Settings) -> Verdict:
    """Open the configured mic as `run` does, wait for the first frame, close it."""
    from ..app.engines import build_microphone
    from ..ports.audio import AudioDeviceError

    source = build_microphone(settings)
    try:
        await source.start()
        await asyncio.wait_for(anext(source), FIRST_FRAME_TIMEOUT_S)
    except AudioDeviceError as exc:
        return _audio_failure(exc, "input", settings.audio.input_device)
    except (TimeoutError, StopAsyncIteration):
        return fail(f"{source.device_name or 'the input'} opened but delivered no audio within "
                    f"{FIRST_FRAME_TIMEOUT_S:g} s", "the device may be held or suspended by another program; try "
                    "another audio.input_device (`toy-runtime devices`)")
    finally:
        await source.aclose()
    name, rate = source.device_name, source.device_rate_hz
    if rate != settings.audio.sample_rate_hz:
        return warn(f"{name!r} opened at {rate} Hz, not 16 kHz: resampled in software",
                    "pick a device that captures at 16 kHz (the ALSA `pulse` or a `plughw:` device) to save CPU")
    return ok(f"{name!r} captures at 16 kHz")


async def check_audio_output(settings: Settings) -> Verdict:
    """Open the configured speaker as `run` does and play 100 ms of silence through it."""
    from ..app.engines import build_speaker
    from ..ports.audio import AudioDeviceError

    sink = build_speaker(settings)
    try:
        await sink.start()
        await sink.play(bytes(3200), 16000, answer_id="doctor")  # 100 ms of 16 kHz silence (resampled as needed)
        await asyncio.wait_for(sink.drain(), FIRST_FRAME_TIMEOUT_S)
    except AudioDeviceError as exc:
        return _audio_failure(exc, "output", settings.audio.output_device)
    except TimeoutError:
        return fail(f"{sink.device_name or 'the output'} opened but did not play within {FIRST_FRAME_TIMEOUT_S:g} s",
                    "the device may be held or suspended by another program; try another audio.output_device")
    finally:
        await sink.aclose()
    return ok(f"{sink.device_name!r} plays at {sink.sample_rate_hz} Hz (16 kHz and 22.05 kHz audio resampled to it)"
              if sink.sample_rate_hz not in (16000, 22050) else
              f"{sink.device_name!r} plays at {sink.sample_rate_hz} Hz")


# -- mixer ----------------------------------------------------------------------------------------------


async def check_alsa_control(settings: Settings) -> Verdict:
    """The configured ALSA mixer control opens and reads back (volume.backend = "alsa" only)."""
    volume = settings.volume
    if volume.backend != "alsa":
        return skip(f"volume.backend is {volume.backend!r}: no ALSA control is used")
    from ..ports.device import MixerError

    try:
        from ..adapters.alsa_mixer import AlsaMixer

        mixer = AlsaMixer(device=volume.device, control=volume.control)
    except ImportError as exc:
        return fail(str(exc), "apt-get install libasound2-dev && pip install pyalsaaudio")
    try:
        state = await mixer.check()
    except MixerError as exc:
        available = ", ".join(exc.available) or "none"
        if exc.code == "no_such_device":
            fix = "set volume.device to an ALSA mixer device (`default`, `pulse`, `hw:1`…); cards: `aplay -l`"
        elif exc.code in ("no_such_control", "not_a_playback_control"):
            fix = (f"set volume.control to one of the controls of {volume.device!r}: {available} "
                   f"(`amixer -D {volume.device} scontrols`)")
        else:
            fix = f"check the ALSA setup (`amixer -D {volume.device}`); controls: {available}"
        return fail(exc.message, fix)
    finally:
        mixer.close()
    where = f"{volume.control!r} on {volume.device!r}"
    if state.muted or state.level == 0:
        return warn(f"{where} is {'muted' if state.muted else 'at 0 %'}: the toy will be silent",
                    f"amixer -D {volume.device} sset {volume.control} 50% unmute")
    return ok(f"{where}: {state.level} %")
