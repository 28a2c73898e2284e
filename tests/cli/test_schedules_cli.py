"""Schedules made in `chat` persist in `[calendar] path`, are listed and cancelled by `schedules`, and fire as
reminders while `chat` runs (a host event, printed as speech — never as user text)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

from .test_cli import run_cli


def test_chat_schedule_then_list_and_cancel(tmp_path):
    calendar = tmp_path / "cal.sqlite3"
    env = {"TOY_CALENDAR__PATH": str(calendar)}
    with ScriptedLLMServer([Reply(text="Okay!<agent_events>calendar.schedule.create</agent_events>")]) as server:
        proc = run_cli("chat", "--json", "--llm-base-url", server.url,
                       input_text="remind me to water the plants every day at 7 am\n", tmp_path=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    listed = run_cli("schedules", "list", "--json", tmp_path=tmp_path, env=env)
    rows = json.loads(listed.stdout)
    assert len(rows) == 1 and rows[0]["title"] == "water the plants"
    assert rows[0]["recurrence"]["frequency"] == "daily" and rows[0]["next_reminder_at"]
    cancelled = run_cli("schedules", "cancel", rows[0]["id"], tmp_path=tmp_path, env=env)
    assert cancelled.returncode == 0
    assert json.loads(run_cli("schedules", "list", "--json", tmp_path=tmp_path, env=env).stdout) == []
    assert len(json.loads(run_cli("schedules", "list", "--json", "--all", tmp_path=tmp_path, env=env).stdout)) == 1
    missing = run_cli("schedules", "cancel", "sch_nope", tmp_path=tmp_path, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_reminder_fires_while_chatting(tmp_path):
    import os

    start = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=0)
    call = {"title": "drink some water", "start_at": start.isoformat(), "timezone": "UTC"}
    with ScriptedLLMServer([Reply(text="Okay!", tool_calls=[("add_schedule", json.dumps(call))])]) as server:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
        environ["TOY_STATE_DIR"] = str(tmp_path)
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "chat", "--json", "--mode", "chat_agent_tools",
                                 "--llm-base-url", server.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=environ)
        try:
            # the child's words carry the time: a proposed time alone is never scheduled ("in a moment" would ask)
            proc.stdin.write(f"at {start.isoformat()} remind me to drink some water\n")
            proc.stdin.flush()
            lines, deadline = [], time.monotonic() + 20
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(json.loads(line))
                if any(l.get("kind") == "reminder" for l in lines):
                    break
        finally:
            proc.stdin.close()
            proc.wait(timeout=20)
    reminders = [l for l in lines if l.get("kind") == "reminder"]
    assert reminders and "drink some water" in reminders[0]["text"]
    assert len(server.requests) == 1  # the reminder did not become a user turn
    assert proc.returncode == 0
