"""The whole voice loop on the virtual sound card: `toy-runtime run` as a real process captures piper speech from
the "mic" monitor, answers through the scripted LLM server, and speaks into "speaker", which the test records and
transcribes. Checks the ordering the design requires and a clean shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.audio.conftest import transcribe
from toy_runtime.testing.fake_searxng import FakeSearxng
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, wait_for, child_env

pytestmark = pytest.mark.audio

SEARCH_HOLD_S = 2.0  # inside the search event's 4 s timeout (and the 3.5 s adapter budget below)


def rms(pcm: bytes) -> float:
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(x * x))) if len(x) else 0.0


def our_streams(card, kind: str) -> list[str]:
    """Playback (sink-inputs) or capture (source-outputs) streams of PortAudio clients (ours), not pacat/parec."""
    out = card.pactl("list", kind)
    blocks = out.split("\n\n")
    return [b for b in blocks if "application.process.binary" in b and "python" in b]


def test_spoken_turns_answer_first_then_events_then_terminate(sound_card, speak, sphinx, tmp_path):
    asked = []

    def answer(request):
        last = str(request["messages"][-1]["content"])
        if last.startswith("[event results]"):
            return Reply(text="I checked, and it will be sunny and warm today.")
        asked.append(last)
        if len(asked) == 1:  # keyed on order, not on the transcript, so an ASR slip cannot change the script
            return Reply(text="Good question, let me look that up for you."
                              "<agent_events>knowledge.web.search</agent_events>")
        return Reply(text="Bye bye, see you soon!<agent_events>session.terminate</agent_events>")

    with ScriptedLLMServer(answer) as llm, FakeSearxng(mode="slow", delay_s=SEARCH_HOLD_S) as searx:
        env = child_env()
        env.update(sound_card.runtime_env)
        env.update({
            "TOY_STATE_DIR": str(tmp_path),
            "TOY_AUDIO__INPUT_DEVICE": "pulse",
            "TOY_AUDIO__OUTPUT_DEVICE": "pulse",
            "TOY_LLM__BASE_URL": llm.url,
            "TOY_LLM__MODEL": "scripted-model",
            "TOY_SEARCH__URL": searx.url,
            "TOY_SEARCH__TIMEOUT_S": "3.5",
            "TOY_SESSION__IDLE_TIMEOUT_S": "30",
            "TOY_TTS__DETERMINISTIC": "true",  # the toy's answer is transcribed below: the same waveform every run
        })
        audit = tmp_path / "audit.jsonl"
        recording = sound_card.start_recording()
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            ready = wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "the runtime to be ready", proc)[0]
            # READY means listening: the recognizer is loaded; the voice and the LLM SDK finish loading after it
            marks = ready["marks"]
            assert 0 < marks["interpreter"] < marks["main"] < marks["settings"] < marks["speech recognizer"]
            assert marks["speech recognizer"] <= marks["ready"] == ready["since_start_ms"] and "voice" not in marks
            time.sleep(0.5)
            question = speak("what is the weather today")
            sound_card.play_to_mic(question.pcm, question.sample_rate_hz, pad_ms=100)
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 40, "the first spoken turn", proc)[0]

            # answer 1 was audible before the held search finished (an order, not a margin: a busy machine
            # synthesizes the first clause slower)
            waterfall = turn["waterfall_ms"]
            assert "weather" in turn["text"] and asked[0] == turn["text"]
            assert waterfall["first_audio"] is not None
            search_done = waterfall["event:knowledge.web.search"]
            assert waterfall["first_audio"] < search_done, waterfall
            assert waterfall["second_answer_audio"] > search_done
            assert all("agent_events" not in line for line in turn["spoken"])

            time.sleep(0.5)
            # pocketsphinx hears a synthesized "goodbye" as "bike", and a model's goodbye needs the child's words to
            # say one (issue 27): "good night" is heard as said
            bye = speak("good night")
            sound_card.play_to_mic(bye.pcm, bye.sample_rate_hz, pad_ms=100)
            closed = wait_for(lambda: [r for r in audit_records(audit, "voice.session_closed")
                                       if r["reason"] == "terminated"], 40, "the session to close", proc)
            assert closed
            # echo cancellation is on by default: the speaker's stream outlives the session (one unbroken render
            # stream for the canceller; a new stream's buffering would move the echo), and the mic listens on
            time.sleep(0.5)
            assert our_streams(sound_card, "sink-inputs") and our_streams(sound_card, "source-outputs")
            warm = audit_records(audit, "runtime.warm")[0]["marks"]
            assert warm["ready"] < warm["voice"] <= warm["warm"]
            states = [r["state"] for r in audit_records(audit, "voice.state")]
            for expected in ("listening", "thinking", "speaking", "idle"):
                assert expected in states
        finally:
            heard = recording.stop()
            proc.send_signal(signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
        assert proc.returncode == 0, out

    # what came out of the speaker is audible and says what the LLM said (and never the hidden block)
    assert rms(heard) > 300
    text = transcribe(sphinx, heard, lead_ms=0, tail_ms=0)
    assert "look" in text and "agent" not in text
    assert not our_streams(sound_card, "source-outputs")
