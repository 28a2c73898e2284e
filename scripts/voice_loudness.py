#!/usr/bin/env python
"""How evenly loud the default voice is, sentence by sentence: piper's per-sentence peak normalization against the
split voice's level set slice by slice (speech_out/sentence_gain.py). Prints figures; nothing here asserts.

    python scripts/voice_loudness.py [--repeats 3]

Each sentence is synthesized with piper's default noise (as a toy speaks), `--repeats` times. Loudness is the RMS
over the 20 ms windows within 30 dB of the sentence's loudest one (speech, not its pauses), in dBFS.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCES = ["Sure!", "Okay.", "Here is a short answer for you.", "Elephants are the biggest animals that walk on land.",
             "I set a reminder for five o'clock.", "Hello there!", "What a lovely name.",
             "The moon is about three hundred eighty thousand kilometers away.", "Let's play a game!",
             "Goodbye, see you soon.", "Cats like to sleep in warm sunny spots.", "Twelve.", "Yes!",
             "No, I can't do that.", "Do you want to hear a story?", "Brush your teeth before bed.",
             "That is a great question!", "Bananas are yellow."]


def speech_rms_db(samples: np.ndarray, rate: int) -> float:
    window = rate // 50
    n = len(samples) // window
    rms = np.sqrt((samples[:n * window].reshape(n, window) ** 2).mean(1)) + 1e-9
    db = 20 * np.log10(rms)
    speech = db > db.max() - 30
    return float(10 * np.log10((rms[speech] ** 2).mean()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from piper import SynthesisConfig

    from toy_runtime.adapters.piper_sliced import MIN_SLICE_FRAMES
    from toy_runtime.adapters.piper_split import slice_plan, split_voice
    from toy_runtime.adapters.piper_tts import PiperSynthesizer, default_voice_paths
    from toy_runtime.speech_out.sentence_gain import SentenceGain
    from toy_runtime.config import TtsConfig

    model, config = default_voice_paths()
    with tempfile.TemporaryDirectory() as cache:
        split = split_voice(model, cache, config_path=config)
    whole = PiperSynthesizer()
    voice, rate, hop = whole._voice, whole.sample_rate_hz, split.hop_samples
    tts = TtsConfig()
    chunk = tts.vocoder_window_frames - 2 * split.context_frames
    piper_db, sliced_db, drops, full_scale, total = [], [], [], 0, 0
    for _ in range(args.repeats):
        for text in SENTENCES:
            for phonemes in voice.phonemize(text):
                raw = np.asarray(voice.phoneme_ids_to_audio(voice.phonemes_to_ids(phonemes), SynthesisConfig()))
                piper_db.append(speech_rms_db(raw / np.abs(raw).max(), rate))
                gain = SentenceGain(split.reference_peak)
                first_gain = gain.gain
                frames = len(raw) // hop
                plan = slice_plan(frames, chunk_frames=chunk, context_frames=split.context_frames,
                                  first_frames=tts.first_slice_frames, min_frames=MIN_SLICE_FRAMES)
                out = np.concatenate([gain.apply(raw[a * hop:(b * hop if b < frames else len(raw))])
                                      for a, b in plan])
                sliced_db.append(speech_rms_db(out, rate))
                drops.append(20 * np.log10(first_gain / gain.gain))
                full_scale += int((np.abs(out) >= 0.99999).sum())
                total += out.size
    whole.close()
    p, s, d = np.array(piper_db), np.array(sliced_db), np.array(drops)
    lowered = d > 0.01
    print(f"joe, reference peak {split.reference_peak:.3f}, {len(p)} sentences")
    print(f"piper, each sentence's peak at full scale: {p.mean():.1f} dBFS mean, {p.std():.2f} dB standard deviation")
    print(f"split voice, SentenceGain:                 {s.mean():.1f} dBFS mean, {s.std():.2f} dB standard deviation")
    print(f"gain lowered within a sentence: {lowered.mean() * 100:.0f} % of sentences, median "
          f"{np.median(d[lowered]) if lowered.any() else 0:.2f} dB, at most {d.max():.2f} dB")
    print(f"samples at full scale: {full_scale} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
