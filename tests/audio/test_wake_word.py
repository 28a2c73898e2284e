"""The wake word: the port's contract on the in-memory fake and on microWakeWord with real voices — the toy's own
(piper) and espeak-ng's, which it never speaks with — and on the capture path of `run`."""

from __future__ import annotations

import io
import shutil
import subprocess
import wave

import pytest

from toy_runtime.fakes.wake import NeverWakes, ScriptedWakeWord
from toy_runtime.ports.wake import WakeWordDetector
from toy_runtime.testing.services import unavailable

SECOND = 32000  # bytes of 16 kHz int16


def espeak(text: str, voice: str) -> bytes:
    if shutil.which("espeak-ng") is None:
        unavailable("espeak-ng is not installed (apt install espeak-ng): the wake word's other voices")
    from toy_runtime.audio.resample import resample

    out = subprocess.run(["espeak-ng", "-v", voice, "--stdout", text], capture_output=True, check=True).stdout
    with wave.open(io.BytesIO(out)) as w:
        return resample(w.readframes(w.getnframes()), w.getframerate(), 16000)


def wakes(detector, pcm: bytes, *, lead_s: float = 1.0, tail_s: float = 0.5) -> list[float]:
    """Seconds (from the start of the phrase) at which the detector fired, fed 20 ms at a time."""
    audio = bytes(int(lead_s * SECOND)) + pcm + bytes(int(tail_s * SECOND))
    return [round(i / SECOND - lead_s, 2) for i in range(0, len(audio), 640) if detector.process(audio[i : i + 640])]


def test_the_fakes_keep_the_port():
    for fake in (ScriptedWakeWord([3200]), NeverWakes()):
        assert isinstance(fake, WakeWordDetector)
    scripted = ScriptedWakeWord([1600])  # samples: the fifth 20 ms frame
    assert [scripted.process(bytes(640)) for _ in range(6)] == [False] * 4 + [True, False]
    assert not any(NeverWakes().process(bytes(640)) for _ in range(10))


@pytest.fixture(scope="module")
def okay_nabu():
    from toy_runtime.adapters.micro_wakeword import MicroWakeWordDetector

    return MicroWakeWordDetector("okay_nabu")


def test_the_model_wakes_once_on_its_phrase_in_the_toys_voice_and_in_others(okay_nabu, phrases):
    said = {"piper": phrases.speak_at("okay nabu", 16000), "espeak en-us": espeak("okay nabu", "en-us"),
            "espeak en-gb": espeak("okay nabu", "en-gb"), "espeak en-us+m3": espeak("ok nabu", "en-us+m3")}
    for voice, pcm in said.items():
        okay_nabu.reset()
        hits = wakes(okay_nabu, pcm, lead_s=1.6)  # past the refractory time of the reset
        assert len(hits) == 1, (voice, hits)  # once, not again on the same phrase
        assert 0 < hits[0] <= len(pcm) / SECOND + 0.3, (voice, hits)  # as the phrase ends, not before it


def test_other_words_and_silence_never_wake_it(okay_nabu, phrases):
    okay_nabu.reset()
    for pcm in (phrases.speak_at("what is the weather today", 16000), espeak("tell me a story about a dog", "en-us"),
                espeak("我们明天去公园玩吧", "cmn"), bytes(3 * SECOND)):
        assert wakes(okay_nabu, pcm, lead_s=1.6) == []


def test_a_model_that_does_not_exist_is_one_clear_line():
    from toy_runtime.adapters.micro_wakeword import MicroWakeWordDetector

    with pytest.raises(ValueError, match="neither a builtin .*okay_nabu.* nor a microWakeWord JSON"):
        MicroWakeWordDetector("hey_toy")


def test_a_makers_own_model_loads_from_its_json(tmp_path):
    """The builtin okay_nabu files copied elsewhere stand in for a maker's model."""
    import pymicro_wakeword
    from pathlib import Path

    from toy_runtime.adapters.micro_wakeword import MicroWakeWordDetector

    models = Path(pymicro_wakeword.__file__).parent / "models"
    for name in ("okay_nabu.json", "okay_nabu.tflite"):
        shutil.copy(models / name, tmp_path / name)
    assert MicroWakeWordDetector(str(tmp_path / "okay_nabu.json"), probability_cutoff=0.9).name == "Okay Nabu"


def test_run_wakes_on_the_word_and_not_on_other_speech(sound_card, speak, phrases, tmp_path):
    """`run` with `[session] trigger = "wake_word"` on the virtual card: a question alone opens nothing; "okay nabu"
    and then the question opens a session (with the earcon) and the question is answered."""
    import subprocess
    import sys
    import time

    from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
    from toy_runtime.testing.services import audit_records, child_env, wait_for

    with ScriptedLLMServer(default=Reply(text="It is sunny today.")) as llm:
        env = child_env()
        env.update(sound_card.runtime_env)
        env.update({"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                    "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "TOY_SESSION__TRIGGER": "wake_word",
                    "TOY_LLM__BASE_URL": llm.url, "TOY_LLM__MODEL": "scripted-model"})
        audit = tmp_path / "audit.jsonl"
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: audit_records(audit, "runtime.warm"), 90, "the runtime to load", proc)
            question = speak("what is the weather today")
            sound_card.play_to_mic(question.pcm, question.sample_rate_hz, pad_ms=300)
            time.sleep(1.5)
            assert not audit_records(audit, "voice.session_opened")  # speech without the word opens nothing
            assert not llm.requests
            wake = phrases.speak_at("okay nabu", 16000)
            sound_card.play_to_mic(wake + bytes(16000) + phrases.speak_at("what is the weather today", 16000),
                                   16000, pad_ms=300)
            woke = wait_for(lambda: audit_records(audit, "voice.wake_word"), 20, "the wake word", proc)[0]
            opened = wait_for(lambda: audit_records(audit, "voice.session_opened"), 10, "a session", proc)[0]
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 40, "the question answered", proc)[0]
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=20)
    assert woke["word"] == "Okay Nabu" and woke["ms_after_phrase"] < 1000, woke
    assert opened["reason"] == "wake_word", opened
    # wake to listening: the session (its speaker open, the earcon queued) within 200 ms of the detection
    assert opened["ts"] - woke["ts"] < 0.2, (opened["ts"] - woke["ts"])
    assert turn["spoken"] and "sunny" in " ".join(turn["spoken"]), turn
    assert "nabu" not in turn["text"].lower()  # the word was not the request
    assert "say 'Okay Nabu' to talk" in out, out[-2000:]
