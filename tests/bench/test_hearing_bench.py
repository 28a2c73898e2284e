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
    shifted = np.frombuffer(in_room(tone, None, shift=80), np.int16).astype(float)
    assert len(shifted) == len(quiet) + 80  # 5 ms more of the room before the speech
    assert np.allclose(shifted[3200 + 80:3200 + 80 + 16000], quiet[3200:3200 + 16000], atol=120)  # the room differs


def test_a_row_on_the_real_recognizer(whisper, speak16k):
    sentences = ["turn the volume down", "what is your name"]
    row = measure("whisper", whisper, "en", "piper-joe", [speak16k(s) for s in sentences], "none", None, sentences,
                  shifts=(0, 80))
    assert row.clips == 2 and row.error_rate == 0.0 and row.language_right == 1.0
    assert row.shifts == (0, 80) and row.error_spread == (0.0, 0.0)
    assert row.finish_ms_p50 > 0 and 0 < row.cpu_per_audio_s < 2
    assert "| whisper | en | piper-joe | none | 2 × 2 | 0.0% (0.0%–0.0%) | 100% |" in markdown([row])


def test_a_row_pools_its_shifts_and_keeps_their_spread():
    class OneWrongHearing:
        """Hears the second shift's first clip wrong: 1 word of 8 at that shift, 1 of 16 over both."""
        language = "en"

        def __init__(self):
            self.count = 0

        def start_utterance(self):
            self.count += 1

        def accept(self, pcm):
            pass

        def finish(self):
            return "turn the volume up" if self.count == 3 else ["turn the volume down", "hello there now yes"][
                (self.count - 1) % 2]

    sentences = ["turn the volume down", "hello there now yes"]
    clip = np.zeros(1600, np.int16).tobytes()
    row = measure("fake", OneWrongHearing(), "en", "v", [clip, clip], "none", None, sentences, shifts=(0, 40))
    assert row.error_rate == 0.0625 and row.error_spread == (0.0, 0.125)
    assert row.worst[0] == ("turn the volume down", "turn the volume down")  # worst is read at the first shift
