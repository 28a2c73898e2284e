"""Streaming English recognition with PocketSphinx, using the en-us model shipped inside the wheel by default.

No download is needed: this is the runtime's embedded English default. Decoding runs while the user speaks
(`accept`), so `finish()` only closes the utterance. The second "fwdflat" pass is off by default: on this
class of hardware it costs ~120 ms after the end of speech for no gain on short commands (measured).
"""

from __future__ import annotations

import builtins
import struct
from pathlib import Path
from typing import Any

from toy_runtime.adapters.pocketsphinx_native import NativeDecoder
from toy_runtime.ports.speech import SpeechEngineError

__all__ = ["PocketsphinxRecognizer"]


class PocketsphinxRecognizer:
    """SpeechRecognizer over pocketsphinx's decoder (start_utt / process_raw / end_utt), called without the GIL
    (pocketsphinx_native), so the rest of the runtime goes on while it decodes.

    `hmm`, `lm`, `dict` default to the model inside the wheel; `jsgf` (a JSGF grammar string) restricts the
    vocabulary instead of the language model; `decoder_options` go to Decoder() unchanged. With
    `dictionary_cache` (a writable directory) and no explicit `dict`, the bundled dictionary is cut down to the
    language model's words once and cached there (same results; faster load, less memory: see
    pocketsphinx_dict). Partials are computed
    at most every `partial_interval_ms` of audio (hyp() walks the search space). Construction loads the model
    (~0.8 s): do it in a worker thread.
    """

    def __init__(
        self,
        *,
        hmm: str | None = None,
        lm: str | None = None,
        dict: str | None = None,  # noqa: A002 - PocketSphinx's own option name
        jsgf: str | None = None,
        sample_rate_hz: int = 16000,
        fwdflat: bool = False,
        partial_interval_ms: float = 200.0,
        dictionary_cache: str | Path | None = None,
        **decoder_options: Any,
    ) -> None:
        try:
            import pocketsphinx  # noqa: F401 - the package whose library NativeDecoder calls
        except ImportError as exc:
            raise ImportError(f"pocketsphinx is not installed (pip install pocketsphinx): {exc}") from exc
        options: builtins.dict[str, Any] = {"loglevel": "FATAL", "samprate": float(sample_rate_hz),
                                            "fwdflat": fwdflat}
        searches = {"jsgf", "fsg", "kws", "keyphrase"}  # grammars and keyword lists may need words the LM lacks
        if dictionary_cache is not None and dict is None and jsgf is None and not searches & set(decoder_options):
            dict = _dictionary_for_lm(lm, dictionary_cache)  # noqa: A001 - None keeps the bundled dictionary
        for key, value in (("hmm", hmm), ("lm", lm), ("dict", dict)):
            if value is not None:
                options[key] = str(value)
        options.update(decoder_options)
        try:
            self._decoder = NativeDecoder(**options)
            if jsgf is not None:
                self._decoder.add_jsgf_string("grammar", jsgf)
                self._decoder.activate_search("grammar")
        except (RuntimeError, ValueError, OSError) as exc:
            raise SpeechEngineError("asr-model-failed", f"pocketsphinx could not load: {exc}") from exc
        self.sample_rate_hz = sample_rate_hz
        self._partial_every = int(sample_rate_hz * partial_interval_ms / 1000) * 2  # bytes
        self._in_utt = False
        self._since_partial = 0
        self._partial = ""

    @property
    def model_paths(self) -> dict[str, str]:
        """The acoustic model, language model and dictionary in use."""
        c = self._decoder.config
        return {"hmm": str(c["hmm"]), "lm": str(c["lm"]), "dict": str(c["dict"])}

    def start_utterance(self) -> None:
        """Begin an utterance (closing any unfinished one)."""
        if self._in_utt:
            self._decoder.end_utt()
        self._decoder.start_utt()
        self._in_utt = True
        self._since_partial = 0
        self._partial = ""

    def accept(self, pcm: bytes) -> str | None:
        """Decode audio; returns the hypothesis when it changed (checked every partial_interval_ms)."""
        if not self._in_utt:
            self.start_utterance()
        self._decoder.process_raw(pcm, False, False)  # without the GIL (pocketsphinx_native)
        self._since_partial += len(pcm)
        if self._partial_every <= 0 or self._since_partial < self._partial_every:
            return None
        self._since_partial = 0
        text = self._decoder.hyp() or ""
        if text and text != self._partial:
            self._partial = text
            return text
        return None

    def finish(self) -> str:
        """Close the utterance and return the best hypothesis ("" for none)."""
        if not self._in_utt:
            return ""
        self._decoder.end_utt()
        self._in_utt = False
        return (self._decoder.hyp() or "").strip()

    def reset(self) -> None:
        """Abandon the current utterance."""
        if self._in_utt:
            self._decoder.end_utt()
            self._in_utt = False
        self._partial = ""
        self._since_partial = 0


def _dictionary_for_lm(lm: str | Path | None, cache_dir: str | Path) -> str | None:
    """The decoder's default dictionary filtered to `lm`'s words (its default LM when None), or None to use it
    whole."""
    from pocketsphinx import Config

    from toy_runtime.adapters.pocketsphinx_dict import dictionary_for_lm

    defaults = Config()  # the same model files Decoder() would load
    try:
        filtered = dictionary_for_lm(defaults["dict"], lm or defaults["lm"], cache_dir)
    except (OSError, ValueError, struct.error):  # a read-only disk, an odd LM: the full dictionary works, slower
        return None
    return str(filtered) if filtered is not None else None
