"""`toy-runtime doctor`: checks that the toy can run here and says how to fix what cannot.

Each check prints one line, `OK|WARN|FAIL|SKIP  name  detail`, and for WARN/FAIL a `fix:` line:

    config        the settings load (TOML profile + environment)
    state-dir     the state directory (and the audit/calendar directories) take an fsync'ed file; free space
    audio-input   the configured mic opens at 16 kHz and delivers frames (SoundDeviceSource, as `run` uses it)
    audio-output  the configured speaker opens and plays 100 ms of silence (SoundDeviceSink)
    asr           the ASR model loads and decodes half a second of audio
    tts           the TTS voice loads and synthesizes one short word
    alsa-control  the ALSA mixer control exists and reads back (only with volume.backend = "alsa")
    broker        the MQTT broker accepts a session with the configured credentials (only with mqtt.url)
    llm           the endpoint streams a 1-token completion; first-token time (only with llm.base_url: WARN offline)
    search        Wikipedia (the default) or SearxNG (search.url) answers one query (WARN: off, canned or unreachable)

The broker check connects with a plain probe endpoint, not a BridgeClient: a BridgeClient would publish the
retained presence `online`, then `offline`, and so tell the firmware that a running toy-runtime service went away.

Every check has a time bound; a check that cannot run is SKIP (not applicable, `--skip`, or the config failed).
Exit code 1 when any check FAILs, else 0 (WARN and SKIP do not fail). `--json` prints a list of
{name, status, detail, fix, ms} instead of the lines.
"""

from .runner import CHECKS, DEFAULT_TIMEOUTS_S, diagnose, register, run_doctor
from .verdict import CheckResult

__all__ = ["CHECKS", "DEFAULT_TIMEOUTS_S", "CheckResult", "diagnose", "register", "run_doctor"]
