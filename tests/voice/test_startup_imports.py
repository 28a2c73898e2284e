"""What `toy-runtime run` imports before it is listening. READY comes after the recognizer, the runtime and the
microphone; the voice (onnxruntime, numpy), the JSON-Schema checks and the openai SDK load after it (each costs
0.1-1 s of interpreter time). A new top-level import of one of them on the listening path fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

DEFERRED = ("openai", "httpx", "jsonschema", "numpy", "onnxruntime", "piper")

LISTENING_PATH = """
import json, sys
from toy_runtime.config import load_settings, with_updates
settings = with_updates(load_settings(env={"TOY_STATE_DIR": sys.argv[1]}),
                        llm={"base_url": "http://127.0.0.1:9/v1"}, mqtt={"url": "mqtt://127.0.0.1:9"})
import toy_runtime.voice_cli
from toy_runtime.app import build_runtime, build_vad, check_voice_files, endpointer_config
from toy_runtime.audio.listener import Listener
from toy_runtime.audio.loading_voice import LoadingSynthesizer
from toy_runtime.audio.recovery import ReopeningSink, ReopeningSource
from toy_runtime.device_link import start_device_link
from toy_runtime.heap import trim_heap
from toy_runtime.reminders import start_scheduler
from toy_runtime.service import ServiceNotifier, install_shutdown_handlers
from toy_runtime.session.voice import VoiceLoop
import toy_runtime.adapters.pocketsphinx_asr, toy_runtime.adapters.sounddevice_io, toy_runtime.adapters.webrtc_vad
check_voice_files(settings)
runtime = build_runtime(settings)
build_vad(settings)
print(json.dumps(sorted(name for name in sys.argv[2:] if name in sys.modules)))
"""


def test_the_listening_path_leaves_the_heavy_modules_for_later(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    proc = subprocess.run([sys.executable, "-c", LISTENING_PATH, str(tmp_path), *DEFERRED], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_the_guard_sees_an_eager_import(tmp_path):
    """The same probe reports a module that is imported (so an empty list above means something)."""
    code = LISTENING_PATH.replace("import json, sys", "import json, sys, numpy")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), *DEFERRED], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["numpy"]
