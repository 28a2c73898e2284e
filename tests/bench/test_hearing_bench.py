"""`bench hearing`: how transcripts are compared, the room the clips are put in, and one real row."""

from __future__ import annotations

import numpy as np

from toy_runtime.bench.hearing import en_key, in_room, markdown, measure, zh_key


def test_numbers_and_punctuation_do_not_count_as_errors():
    assert zh_key("把音量调到30。") == zh_key("把音量调到三十") == "把音量调到三十"
    assert zh_key("明天早上8点") == "明天早上八点" and zh_key("数到10") == "数到十" and zh_key("21") == "二十一"
    assert en_key("Set the volume to 30.") == "set the volume to 30"
    assert en_key("Bye-bye!") == "bye bye"


def test_a_clip_is_levelled_and_gets_the_room_around_it():
    tone = (np.sin(np.arange(16000) / 5) * 3000).astype(np.int16).tobytes()
    quiet = np.frombuffer(in_room(tone, None), np.int16).astype(float)
    assert len(quiet) == 16000 + 200 * 16 + 150 * 16
    speech_rms = np.sqrt((quiet[3200:3200 + 16000] ** 2).mean())
    assert abs(20 * np.log10(speech_rms / 32768) + 24) < 0.5  # -24 dBFS
    assert 0 < np.sqrt((quiet[:3200] ** 2).mean()) < 30  # a quiet room (-70 dBFS) is not digital silence
    fan = np.random.default_rng(1).normal(0, 1000, 32000)
    noisy = np.frombuffer(in_room(tone, fan), np.int16).astype(float)
    noise_rms = np.sqrt((noisy[:3200] ** 2).mean())
    assert abs(20 * np.log10(speech_rms / noise_rms) - 15) < 1.0  # 15 dB below the speech


def test_a_row_on_the_real_recognizer(whisper, speak16k):
    sentences = ["turn the volume down", "what is your name"]
    row = measure("whisper", whisper, "en", "piper-joe", [speak16k(s) for s in sentences], "none", None, sentences)
    assert row.clips == 2 and row.error_rate == 0.0 and row.language_right == 1.0
    assert row.finish_ms_p50 > 0 and 0 < row.cpu_per_audio_s < 2
    assert "| whisper | en | piper-joe | none | 2 | 0.0% | 100% |" in markdown([row])
