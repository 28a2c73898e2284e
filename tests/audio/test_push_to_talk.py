"""`toy-runtime ptt` on the virtual card: Enter opens a session and the mic, the child speaks, the toy answers,
Enter again closes it, end of input exits 0."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, wait_for, child_env

pytestmark = pytest.mark.audio


def test_push_to_talk_session(sound_card, speak, tmp_path):
    with ScriptedLLMServer(lambda request: Reply(text="Hello! I heard you.")) as llm:
        env = child_env()
        env.update(sound_card.runtime_env)
        env.update({"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                    "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "TOY_LLM__BASE_URL": llm.url})
        audit = tmp_path / "audit.jsonl"
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "ptt"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "ready", proc)
            time.sleep(0.3)
            # before Enter nothing listens: speech alone does not open a session
            early = speak("what is the weather today")
            sound_card.play_to_mic(early.pcm, early.sample_rate_hz, pad_ms=100)
            time.sleep(0.5)
            assert not audit_records(audit, "voice.session_opened")
            proc.stdin.write("\n")
            proc.stdin.flush()
            wait_for(lambda: audit_records(audit, "voice.session_opened"), 30, "the session to open", proc)
            time.sleep(0.3)
            sound_card.play_to_mic(early.pcm, early.sample_rate_hz, pad_ms=100)
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 30, "the turn", proc)[0]
            assert "weather" in turn["text"] and turn["spoken"]
            proc.stdin.write("\n")
            proc.stdin.flush()
            closed = wait_for(lambda: audit_records(audit, "voice.session_closed"), 30, "the session to close", proc)
            assert closed[0]["reason"] == "closed"
            proc.stdin.close()  # end of input: ptt stops
            proc.wait(timeout=20)
            out = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, out
