"""A child speaks Mandarin to the real `toy-runtime run` on the virtual card: the recognizer hears Chinese, the
event runs, and the answer comes out of the speaker as Mandarin speech (checked by ear: the recognizer again)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, child_env, end_process, wait_for

REQUEST = "把音量调到三十"
ANSWER = "好的，音量调到三十了。"


def runtime_env(sound_card, llm, tmp_path) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if k not in ("JOURNAL_STREAM", "INVOCATION_ID")}
    env.update(sound_card.runtime_env)
    env.update({"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "TOY_LLM__BASE_URL": llm.url,
                "TOY_SESSION__IDLE_TIMEOUT_S": "30", "TOY_EARS__ECHO_CANCELLATION": "false"})
    return env


@pytest.mark.audio
def test_a_mandarin_request_runs_its_event_and_is_answered_in_mandarin(sound_card, speak_zh, whisper, tmp_path):
    asked: list[list[dict]] = []

    def answer(request):
        asked.append(request["messages"])
        return Reply(text=ANSWER, tool_calls=[("adjust_device_volume",
                                               json.dumps({"mode": "absolute", "value": 30}))])

    audit = tmp_path / "audit.jsonl"
    with ScriptedLLMServer(answer) as llm:
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run", "--mode", "chat_agent_tools"],
                                env=runtime_env(sound_card, llm, tmp_path), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "ready", proc)
            speaker = sound_card.start_recording()
            sound_card.play_to_mic(speak_zh(REQUEST), 16000, pad_ms=100)
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 60, "the turn", proc)[0]
            time.sleep(1.0)  # the turn is recorded when its answer has played; the last samples reach the monitor
            played = speaker.stop()
        finally:
            end_process(proc)
            _, err = proc.communicate(timeout=10)
    heard = turn["text"]
    assert "音量" in heard and re.search("30|三十", heard), (heard, err[-2000:])
    events = {e["name"]: e["status"] for e in audit_records(audit, "event.result")} or turn["events"]
    assert "succeeded" in json.dumps(events), events
    # the model was told the child's language
    assert any("Chinese" in str(m.get("content")) or "中文" in str(m.get("content")) for m in asked[0]), asked[0]
    answer_heard = whisper.transcribe(played)
    assert answer_heard.language == "zh" and "音量" in answer_heard.text, answer_heard
