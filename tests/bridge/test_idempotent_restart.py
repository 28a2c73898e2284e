"""A remote "volume up by 10" redelivered AFTER A RESTART of the runtime applies once: the kernel's idempotency
store is a SQLite file in the state dir. Real mosquitto, real `toy-runtime chat` processes, the same state dir."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import time

from toy_runtime.testing.services import audit_records, child_env, end_process

from .conftest import WireClient

DEVICE = "toyR"
UP_BY_10 = {"v": 1, "command_id": "c1", "name": "device.volume.adjust",
            "arguments": {"mode": "relative", "delta": 10}, "actor": "app"}
UP_BY_5 = {**UP_BY_10, "command_id": "c2", "arguments": {"mode": "relative", "delta": 5}}


def next_message(app: WireClient, wanted, what: str, seen: list, timeout_s: float = 60.0) -> dict:
    """The next message for which `wanted(topic, payload)` holds (every message is kept in `seen`); the timeout is
    only a safety net."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            topic, raw, retained = app.messages.get(timeout=0.5)
        except queue.Empty:
            continue
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw.decode()
        seen.append((topic, payload, retained))
        if wanted(topic, payload):
            return payload
    raise AssertionError(f"timed out waiting for {what}")


def start_runtime(broker, tmp_path, initial_level: int) -> subprocess.Popen:
    env = child_env()
    env.update(TOY_STATE_DIR=str(tmp_path), TOY_VOLUME__INITIAL_LEVEL=str(initial_level))
    return subprocess.Popen([sys.executable, "-m", "toy_runtime", "chat", "--json", "--mqtt-url", broker.url,
                             "--device-id", DEVICE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def online(topic, payload) -> bool:
    return topic == f"toy/{DEVICE}/online" and payload == "online"


def result_of(command_id: str):
    return lambda topic, payload: topic.endswith("command/result") and payload.get("command_id") == command_id


def stop(proc: subprocess.Popen) -> None:
    """End of input ends `chat`; it must exit cleanly (the store is closed, the broker told `offline`)."""
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_a_command_redelivered_after_a_restart_applies_once(broker, tmp_path):
    app = WireClient("127.0.0.1", broker.port, subscribe=[f"toy/{DEVICE}/online", f"toy/{DEVICE}/command/result",
                                                          f"toy/{DEVICE}/volume"])
    seen: list = []
    first = second = None
    try:
        app.wait_ready()
        first = start_runtime(broker, tmp_path, initial_level=50)
        next_message(app, online, "the first runtime online (subscribed)", seen)
        app.publish(f"toy/{DEVICE}/command", UP_BY_10)
        before = next_message(app, result_of("c1"), "the first answer to c1", seen)
        stop(first)

        # a new process over the same state dir; its in-memory mixer starts at another level, so a second
        # application of c1 would answer 30, not 60
        second = start_runtime(broker, tmp_path, initial_level=20)
        next_message(app, online, "the second runtime online (subscribed)", seen)
        app.publish(f"toy/{DEVICE}/command", UP_BY_10)  # the broker's redelivery of the same command id
        after = next_message(app, result_of("c1"), "the answer to the redelivered c1", seen)
        app.publish(f"toy/{DEVICE}/command", UP_BY_5)  # a new command still runs: 20 + 5 (35 if c1 had run again)
        fresh = next_message(app, result_of("c2"), "the answer to c2", seen)
        stop(second)
    finally:
        app.close()
        for proc in (first, second):
            if proc is not None:
                end_process(proc)

    assert before["status"] == "ok" and before["result"]["level"] == 60 and before["result"]["previous_level"] == 50
    assert {**after, "ts": None} == {**before, "ts": None}  # the first answer, replayed (sent at another time)
    assert fresh["status"] == "ok" and fresh["result"]["level"] == 25 and fresh["result"]["previous_level"] == 20
    assert not [p for t, p, _ in seen if t.endswith("/volume") and p.get("level") == 30]  # no second mixer change
    audit = tmp_path / "audit.jsonl"
    replays = audit_records(audit, "event.idempotent_replay")
    assert [r["event_id"] for r in replays] == [f"cmd_{DEVICE}_c1"]
    c1_results = [r for r in audit_records(audit, "event.result") if r["event_id"] == f"cmd_{DEVICE}_c1"]
    assert [r["replayed"] for r in c1_results] == [False, True]
    assert (tmp_path / "idempotency.sqlite3").is_file()
