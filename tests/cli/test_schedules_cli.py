"""Schedules made in `chat` persist in `[calendar] path`, are listed and cancelled by `schedules`, and fire as
reminders while `chat` runs (a host event, printed as speech — never as user text)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

from .test_cli import run_cli
from toy_runtime.testing.services import child_env


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
    when: dict[str, datetime] = {}

    def answer(request):
        last = request["messages"][-1]["content"]
        if "remind me" not in last:
            return Reply(text="Hello!")
        call = {"title": "drink some water", "start_at": when["start"].isoformat(), "timezone": "UTC"}
        return Reply(text="Okay!", tool_calls=[("add_schedule", json.dumps(call))])

    with ScriptedLLMServer(answer) as server:
        environ = child_env()
        environ["TOY_STATE_DIR"] = str(tmp_path)
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "chat", "--json", "--mode", "chat_agent_tools",
                                 "--llm-base-url", server.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=environ)
        output = LineReader(proc.stdout)
        try:
            # a first turn proves the process is up and answering, so a slow start cannot eat the reminder's lead
            proc.stdin.write("hello\n")
            proc.stdin.flush()
            output.until(lambda line: line.get("type") == "turn", timeout_s=120)
            # the child's words carry the time (a proposed time alone is never scheduled); the lead is counted
            # from a turn that is already running, and a reminder judged "past" fails at once instead of hanging
            when["start"] = (datetime.now(timezone.utc) + timedelta(seconds=6)).replace(microsecond=0)
            proc.stdin.write(f"at {when['start'].isoformat()} remind me to drink some water\n")
            proc.stdin.flush()
            # Wait for the reminder itself (an event), not for a wall-clock moment; the bound only stops a broken
            # runtime from hanging the suite.
            lines = output.until(lambda line: line.get("kind") == "reminder"
                                 or (line.get("type") == "event" and line.get("status") != "succeeded"),
                                 timeout_s=120)
            # the child answers the reminder: the model hears it in context
            proc.stdin.write("I already did it!\n")
            proc.stdin.flush()
            output.until(lambda line: line.get("type") == "turn", timeout_s=120)
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
            errors = proc.stderr.read()
            proc.stderr.close()
    scheduled = [line for line in lines if line.get("type") == "event"]
    assert scheduled and scheduled[0]["status"] == "succeeded", (lines, errors)
    reminders = [line for line in lines if line.get("kind") == "reminder"]
    assert reminders and "drink some water" in reminders[0]["text"], (lines, errors)
    assert len(server.requests) == 3  # the reminder did not become a user turn
    answer_turn = [(m["role"], m["content"]) for m in server.requests[2]["messages"] if m["role"] != "system"]
    assert answer_turn[-2:] == [("assistant", reminders[0]["text"]), ("user", "I already did it!")], answer_turn
    assert proc.returncode == 0, errors


class LineReader:
    """JSON lines of a subprocess's stdout, read on a thread so that waiting for one can time out."""

    def __init__(self, stream) -> None:
        self._lines: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), name="stdout-reader", daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self._lines.put(json.loads(line))
        self._lines.put(None)  # end of output

    def until(self, done, *, timeout_s: float) -> list[dict]:
        """Lines up to and including the first for which `done(line)` is true (or all, if output ends first)."""
        lines: list[dict] = []
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"nothing matched within {timeout_s} s; got {lines}") from None
            if line is None:
                return lines
            lines.append(line)
            if done(line):
                return lines
