"""The `toy-runtime` command as a user runs it: a real subprocess, real stdin/stdout, real exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import child_env


def run_cli(*args, input_text=None, env=None, tmp_path=None, timeout=60):
    environ = child_env()
    if tmp_path is not None:
        environ["TOY_STATE_DIR"] = str(tmp_path)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "toy_runtime", *args], input=input_text, capture_output=True,
                          text=True, env=environ, timeout=timeout)


def test_events_list_json_has_the_registry():
    proc = run_cli("events", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == {"session.terminate", "device.volume.adjust", "calendar.schedule.create",
                            "knowledge.web.search"}
    assert by_name["device.volume.adjust"]["tool_name"] == "adjust_device_volume"
    assert by_name["knowledge.web.search"]["result_policy"] == "llm_follow_up"
    for row in rows:
        assert row["schema"]["type"] == "object" and row["description"]


@pytest.mark.parametrize("text,status,arguments", [
    ("set the volume to 30", "resolved", {"mode": "absolute", "value": 30}),
    ("turn it up by 30", "resolved", {"mode": "relative", "delta": 30}),
    ("把音量调到30", "resolved", {"mode": "absolute", "value": 30}),
    ("change the volume", "incomplete", {}),
    ("set the volume to 150", "invalid", None),
])
def test_events_resolve_volume(text, status, arguments):
    proc = run_cli("events", "resolve", "device.volume.adjust", "--text", text, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == status
    if arguments is not None:
        assert out["arguments"] == arguments
    if status == "incomplete":
        assert out["missing"] == ["mode"]
    if status == "invalid":
        assert out["error"]


def test_events_resolve_schedule_against_a_given_clock():
    proc = run_cli("events", "resolve", "calendar.schedule.create", "--text", "明天早上7点提醒我刷牙",
                   "--now", "2026-11-30T20:00:00+08:00", "--tz", "Asia/Shanghai", "--json")
    out = json.loads(proc.stdout)
    assert out["status"] == "resolved"
    assert out["arguments"]["start_at"].startswith("2026-12-01T07:00:00+08:00")
    assert out["arguments"]["timezone"] == "Asia/Shanghai"


def test_events_resolve_unknown_event_exits_2():
    proc = run_cli("events", "resolve", "device.explode", "--text", "boom", "--json")
    assert proc.returncode == 2 and "unknown event" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("content,needle", [
    ("[vad]\nhangover_ms = 5\n", "vad.hangover_ms"),
    ("[vad]\nhangover_ms = 300\ncomplete_ms = 500\n", "vad.complete_ms: 500 is longer than hangover_ms"),
    ("[vad]\nunfinished_ms = 100\n", "vad.unfinished_ms: 100 is shorter than hangover_ms"),
    ("[vad]\nturn_end = 'smart'\n", "vad.turn_end"),
    ("[llm]\napi_key = 'sk-123456789'\n", "llm.api_key"),
    ("[audio\n", "invalid TOML"),
    ("[session]\ntimezone = 'Mars/Olympus'\n", "session.timezone"),
    ("[volume]\nbakend = 'alsa'\n", "volume.bakend: unknown key"),
])
def test_bad_config_is_one_line_exit_2(tmp_path, content, needle):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    proc = run_cli("events", "list", "--config", str(path))
    assert proc.returncode == 2
    assert needle in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "sk-123456789" not in proc.stderr


def test_bad_env_value_is_one_line_exit_2():
    proc = run_cli("events", "list", env={"TOY_EVENTS__MAX_CONCURRENCY": "0"})
    assert proc.returncode == 2 and "events.max_concurrency" in proc.stderr


@pytest.mark.parametrize("command", ["run", "ptt"])
def test_a_missing_voice_file_stops_run_before_it_listens(tmp_path, command):
    """The voice loads after READY, so its path is checked before: a typo is a one-line start error, exit 2."""
    proc = run_cli(command, tmp_path=tmp_path, env={"TOY_TTS__VOICE_PATH": str(tmp_path / "nope.onnx")},
                   input_text="")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"toy-runtime: tts.voice_path: no such file: {tmp_path}/nope.onnx\n"
    assert not (tmp_path / "audit.jsonl").exists() or "runtime.ready" not in (tmp_path / "audit.jsonl").read_text()


def test_profiles_in_configs_load():
    from pathlib import Path

    from toy_runtime.config import load_settings

    for path in sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml")):
        load_settings(path, env={})


def test_chat_json_lines_in_order_and_exit_after_terminate(tmp_path):
    script = [
        Reply(text="Okay, turning it up!<agent_events>device.volume.adjust</agent_events>"),
        Reply(text="Let me check that for you.<agent_events>knowledge.web.search</agent_events>"),
        Reply(text="I checked: it is sunny."),
        Reply(text="Bye bye!<agent_events>session.terminate</agent_events>"),
        Reply(text="never reached"),
    ]
    with ScriptedLLMServer(script) as server:
        proc = run_cli("chat", "--json", "--llm-base-url", server.url, "--llm-model", "scripted-model",
                       input_text="turn it up by 20\nwhat's the weather in Paris?\ngoodbye\nstill here?\n",
                       tmp_path=tmp_path, env={"TOY_SEARCH__PROVIDER": "static"})  # search is off by default
        assert len(server.requests) == 4
        assert "Example result" in json.dumps(server.requests[2]["messages"])  # the demo evidence says so
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    kinds = [line["type"] for line in lines]
    assert kinds.count("turn") == 3 and kinds[-1] == "turn"
    first_turn = lines[: kinds.index("turn") + 1]
    assert [l["type"] for l in first_turn] == ["speech", "event", "turn"]
    assert first_turn[1]["name"] == "device.volume.adjust" and first_turn[1]["status"] == "succeeded"
    assert first_turn[1]["arguments"] == {"mode": "relative", "delta": 20}
    assert first_turn[1]["resolution"] == "deterministic"
    assert first_turn[2]["llm_calls"] == 1 and first_turn[2]["terminated"] is False
    second = [l for l in lines if l["type"] == "speech" and l["answer"] == 2]
    assert second and second[0]["sources"]
    assert lines[-1]["terminated"] is True
    assert all("agent_events" not in l.get("text", "") for l in lines)
    audit = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert any(json.loads(a)["kind"] == "turn.completed" for a in audit)


def test_chat_readable_offline_and_end_of_input(tmp_path):
    proc = run_cli("chat", input_text="mute\nhello there\n", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "toy:" in proc.stdout and "can't think right now" in proc.stdout


def test_secrets_never_reach_the_audit_log(tmp_path):
    with ScriptedLLMServer([Reply(text="Hi!")]) as server:
        proc = run_cli("chat", "--json", "--llm-base-url", server.url, input_text="hello\n", tmp_path=tmp_path,
                       env={"OPENAI_API_KEY": "sk-verysecretkey123"})
    assert proc.returncode == 0
    assert "sk-verysecretkey123" not in (tmp_path / "audit.jsonl").read_text()
    assert "sk-verysecretkey123" not in proc.stdout + proc.stderr
