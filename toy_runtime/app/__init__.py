"""The composition root: the one place that builds the runtime from settings and the only importer of adapters.

runtime.py (build_runtime, Runtime), engines.py (VAD/ASR/TTS/mic/speaker), voice.py (`run`/`ptt`), console.py
(`chat`), demo.py (`demo`), firmware.py (the MQTT link). Nothing is imported here: each command loads what it uses."""
