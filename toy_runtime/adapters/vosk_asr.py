"""Streaming recognition with Vosk (Kaldi): one KaldiRecognizer per process, Reset() between utterances.

Vosk finalizes a segment by itself when it hears a pause mid-utterance: AcceptWaveform() then returns true and
`Result()` holds that segment, after which the recognizer starts the next one. The transcript of an utterance is
therefore every non-empty `Result()` seen while feeding plus `FinalResult()` at the end; either part can be empty.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterable

from toy_runtime.ports.speech import SpeechEngineError

__all__ = ["VoskRecognizer", "load_model", "DEFAULT_DROP_TOKENS"]

_INSTALL_HINT = "vosk is not installed (pip install vosk)"
DEFAULT_DROP_TOKENS = ("[unk]", "<unk>", "<UNK>")  # unknown-word tokens differ between models

_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_RECOGNIZERS: dict[str, "VoskRecognizer"] = {}


def _vosk() -> Any:
    try:
        import vosk
    except ImportError as exc:
        raise ImportError(f"{_INSTALL_HINT}: {exc}") from exc
    return vosk


def load_model(model_path: str | Path) -> Any:
    """The vosk.Model for a model directory, loaded once per process (models take seconds and hundreds of MB)."""
    path = str(Path(model_path).resolve())
    with _MODELS_LOCK:
        model = _MODELS.get(path)
        if model is None:
            vosk = _vosk()
            vosk.SetLogLevel(-1)
            if not Path(path, "am").is_dir() and not Path(path, "conf").is_dir():
                raise SpeechEngineError("asr-model-missing", f"not a vosk model directory: {path}")
            try:
                model = vosk.Model(path)
            except Exception as exc:  # vosk raises a bare Exception
                raise SpeechEngineError("asr-model-failed", f"vosk could not load {path}: {exc}") from exc
            _MODELS[path] = model
        return model


class VoskRecognizer:
    """SpeechRecognizer over vosk.KaldiRecognizer.

    `grammar`: optional list of phrases that restricts recognition (include the model's unknown-word token,
    e.g. "[unk]" or "<UNK>", to let other speech through as unknown). Unknown-word tokens in `drop_tokens` are
    removed from transcripts. Use `VoskRecognizer.shared(model_path)` to get the process's single instance.
    Construction loads the model on first use (seconds): do it in a worker thread.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        sample_rate_hz: int = 16000,
        grammar: Iterable[str] | None = None,
        drop_tokens: Iterable[str] = DEFAULT_DROP_TOKENS,
    ) -> None:
        vosk = _vosk()
        self.model_path = str(Path(model_path).resolve())
        self.sample_rate_hz = sample_rate_hz
        self._model = load_model(self.model_path)
        self._drop = set(drop_tokens)
        try:
            if grammar is None:
                self._rec = vosk.KaldiRecognizer(self._model, float(sample_rate_hz))
            else:
                self._rec = vosk.KaldiRecognizer(self._model, float(sample_rate_hz), _grammar_json(grammar))
        except Exception as exc:
            raise SpeechEngineError("asr-model-failed", f"vosk recognizer failed: {exc}") from exc
        self._segments: list[str] = []
        self._partial = ""
        self._in_utt = False
        self.results_mid_stream = 0  # Result() segments collected before FinalResult(), for tests and metrics

    @classmethod
    def shared(cls, model_path: str | Path, **kwargs: Any) -> "VoskRecognizer":
        """The one recognizer of this process for `model_path` (created on first call with `kwargs`)."""
        path = str(Path(model_path).resolve())
        with _MODELS_LOCK:
            rec = _RECOGNIZERS.get(path)
        if rec is None:
            rec = cls(path, **kwargs)
            with _MODELS_LOCK:
                rec = _RECOGNIZERS.setdefault(path, rec)
        return rec

    def set_grammar(self, phrases: Iterable[str] | None) -> None:
        """Restrict recognition to `phrases` (None or [] lifts the restriction when the model allows it)."""
        self._rec.SetGrammar(_grammar_json(phrases or []) if phrases else "[]")
        self.reset()

    def find_word(self, word: str) -> bool:
        """True if `word` is in the model's vocabulary (grammar phrases with unknown words are ignored by vosk)."""
        return int(self._model.vosk_model_find_word(word)) >= 0

    def warm_up(self) -> None:
        """Decode a little silence once: the first decode after loading is ~1.5 s slower (measured)."""
        self.start_utterance()
        self.accept(bytes(int(self.sample_rate_hz * 0.5) * 2))
        self.finish()

    def start_utterance(self) -> None:
        """Begin an utterance: abandons an open one, clears the recognizer and collected segments."""
        self._discard_open()
        self._rec.Reset()
        self._segments = []
        self._partial = ""
        self._in_utt = True

    def accept(self, pcm: bytes) -> str | None:
        """Feed audio; returns the running transcript (finished segments + partial) when it changed."""
        if not self._in_utt:
            self.start_utterance()
        if self._rec.AcceptWaveform(pcm):
            text = self._text(self._rec.Result(), "text")
            if text:
                self._segments.append(text)
                self.results_mid_stream += 1
            current = " ".join(self._segments)
        else:
            partial = self._text(self._rec.PartialResult(), "partial")
            current = " ".join(self._segments + ([partial] if partial else []))
        if current and current != self._partial:
            self._partial = current
            return current
        return None

    def finish(self) -> str:
        """Close the utterance: all mid-stream Result() segments plus FinalResult(), joined."""
        if not self._in_utt:
            return ""
        final = self._text(self._rec.FinalResult(), "text")
        segments = self._segments + ([final] if final else [])
        self._rec.Reset()
        self._segments = []
        self._partial = ""
        self._in_utt = False
        return " ".join(segments).strip()

    def reset(self) -> None:
        """Abandon the current utterance."""
        self._discard_open()
        self._rec.Reset()
        self._segments = []
        self._partial = ""
        self._in_utt = False

    def _discard_open(self) -> None:
        # Reset() alone mid-utterance leaves undecoded audio in vosk's pipeline, and its words then turn up
        # in the *next* utterance (measured: "할게" after Reset). FinalResult() flushes it; we drop the text.
        if self._in_utt:
            self._rec.FinalResult()
            self._in_utt = False

    def _text(self, raw: str, key: str) -> str:
        try:
            value = json.loads(raw).get(key, "")
        except (ValueError, AttributeError):
            return ""
        words = [w for w in str(value).split() if w not in self._drop]
        return " ".join(words)


def _grammar_json(phrases: Iterable[str]) -> str:
    # ensure_ascii=False: vosk's JSON reader does not decode \\uXXXX escapes, so escaped non-ASCII phrases
    # would silently be dropped as "missing in vocabulary" (measured with the Korean model).
    return json.dumps([str(p) for p in phrases], ensure_ascii=False)
