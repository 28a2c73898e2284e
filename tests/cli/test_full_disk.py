"""A full or read-only disk, for real (a small tmpfs, root only): one line and exit 2 at start, and a session that
goes on when the disk fills under it — the audit kept in memory until space returns, a reminder that cannot be
stored told to the child, nothing stored earlier lost."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, child_env

from .helpers import one_line_error
from .test_cli import run_cli
from .test_schedules_cli import LineReader


@pytest.mark.parametrize("command", [("run",), ("chat",), ("config", "check")])
def test_state_dir_on_a_full_disk_is_one_line_with_the_free_space(small_disk, command):
    small_disk.fill()
    proc = run_cli(*command, env={"TOY_STATE_DIR": str(small_disk.path / "state")}, input_text="hello\n")
    line = one_line_error(proc)
    assert line.startswith("state_dir: ") and str(small_disk.path / "state") in line, line
    assert "no space left" in line and "0 bytes free" in line, line


@pytest.mark.parametrize("key,variable", [("audit.path", "TOY_AUDIT__PATH"),
                                          ("calendar.path", "TOY_CALENDAR__PATH")])
def test_a_file_on_a_full_disk_names_its_setting(tmp_path, small_disk, key, variable):
    small_disk.fill()
    proc = run_cli("chat", tmp_path=tmp_path, env={variable: str(small_disk.path / "file")}, input_text="hello\n")
    line = one_line_error(proc)
    assert line.startswith(f"{key}: ") and "no space left" in line, line


def test_low_space_is_a_warning_in_config_check(small_disk):
    proc = run_cli("config", "check", env={"TOY_STATE_DIR": str(small_disk.path / "state")})
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "free" in line]
    assert len(warnings) == 1 and "state_dir" in warnings[0] and "MB free" in warnings[0], proc.stderr


@pytest.mark.parametrize("key,variable,where", [
    ("state_dir", "TOY_STATE_DIR", "ro/state"),
    ("audit.path", "TOY_AUDIT__PATH", "ro/audit.jsonl"),
    ("calendar.path", "TOY_CALENDAR__PATH", "ro/calendar.sqlite3"),
    ("audit.path", "TOY_AUDIT__PATH", "/proc/toy-runtime/audit.jsonl"),
])
@pytest.mark.parametrize("command", [("chat",), ("config", "check")])
def test_a_read_only_or_proc_path_names_its_setting(tmp_path, read_only_disk, key, variable, where, command):
    path = where if where.startswith("/") else str(tmp_path / where)
    proc = run_cli(*command, tmp_path=tmp_path / "state", env={variable: path}, input_text="hello\n")
    line = one_line_error(proc)
    assert line.startswith(f"{key}: ") and path in line, line


def test_chat_goes_on_when_the_disk_fills_mid_session(small_disk):
    """Two turns (one stores a reminder), the disk fills, two more turns (one asks for a reminder), space returns."""
    state = small_disk.path / "state"
    start = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0)

    def answer(request):
        last = request["messages"][-1]["content"]
        if "remind me" not in last:
            return Reply(text="Hello!")
        title = "feed the cat" if "cat" in last else "water the plants"
        call = {"title": title, "start_at": start.isoformat(), "timezone": "UTC"}
        return Reply(text="Okay!", tool_calls=[("add_schedule", json.dumps(call))])

    def say(proc, reader, text):
        proc.stdin.write(text + "\n")
        proc.stdin.flush()
        lines = reader.until(lambda line: line.get("type") == "turn", timeout_s=120)
        if not lines or lines[-1].get("type") != "turn":  # the output ended: the process is gone
            proc.wait(timeout=60)
            raise AssertionError(f"the process died at {text!r} (exit {proc.returncode}): {proc.stderr.read()}")
        return lines

    with ScriptedLLMServer(answer) as server:
        environ = child_env()
        environ["TOY_STATE_DIR"] = str(state)
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "chat", "--json", "--mode", "chat_agent_tools",
                                 "--llm-base-url", server.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=environ)
        reader = LineReader(proc.stdout)
        try:
            say(proc, reader, "hello")
            stored = say(proc, reader, f"at {start.isoformat()} remind me to water the plants")
            small_disk.fill()
            lost = say(proc, reader, f"at {start.isoformat()} remind me to feed the cat")
            after = say(proc, reader, "how are you")
            small_disk.free()
            last = say(proc, reader, "hello again")
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
            errors = proc.stderr.read()
            proc.stderr.close()
    assert proc.returncode == 0, errors
    assert [e["status"] for e in stored if e.get("type") == "event"] == ["succeeded"], stored
    # the reminder that could not be stored failed, and the child heard so
    assert [e["status"] for e in lost if e.get("type") == "event"] == ["failed"], lost
    spoken = " ".join(line["text"] for line in lost if line.get("type") == "speech")
    assert "couldn't save that reminder" in spoken, lost
    assert any(line.get("type") == "speech" and line["text"] == "Hello!" for line in after), after
    assert any(line.get("type") == "speech" for line in last), last
    # one warning for the audit while the disk was full, not one per record; one when it wrote again
    assert sum("audit: cannot write" in line for line in errors.splitlines()) == 1, errors
    assert sum("audit: writing to" in line for line in errors.splitlines()) == 1, errors
    # nothing stored earlier is lost: the first reminder is still there, the second never was
    listed = run_cli("schedules", "list", "--json", env={"TOY_STATE_DIR": str(state)})
    assert [row["title"] for row in json.loads(listed.stdout)] == ["water the plants"], listed.stderr
    # the audit held what it could not write while the disk was full and wrote it once space returned
    utterances = [r.get("text") for r in audit_records(state / "audit.jsonl", "turn.started")]
    assert utterances[2:] == [f"at {start.isoformat()} remind me to feed the cat", "how are you", "hello again"], \
        utterances


def test_a_disk_that_fills_after_the_preflight_is_still_one_line_at_start(tmp_path, small_disk, read_only_disk):
    """build_runtime itself, past a preflight that passed moments ago: the calendar on a full disk, the audit on a
    read-only one; a StartError naming the setting (the CLI prints it as one line, exit 2)."""
    from toy_runtime.app.runtime import build_runtime
    from toy_runtime.config import load_settings
    from toy_runtime.errors import StartError

    small_disk.fill()
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path / "state"),
                                  "TOY_CALENDAR__PATH": str(small_disk.path / "calendar.sqlite3")})
    with pytest.raises(StartError, match=r"^calendar\.path: cannot be written: .*full.* \(0 bytes free\)$"):
        build_runtime(settings)
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path / "state"),
                                  "TOY_AUDIT__PATH": str(read_only_disk.path / "audit.jsonl")})
    with pytest.raises(StartError, match=r"^audit\.path: .* is on a read-only file system$"):
        build_runtime(settings)
