"""The Whisper recognizer: English in voices the toy never speaks with, Mandarin in the neural voice, silence,
and the guards that make a short window safe (repeats, traditional characters, the joined model on disk)."""

from __future__ import annotations

import re

import jiwer
import pytest

from toy_runtime.adapters.whisper_asr import WhisperRecognizer, _cut_repeats, _cut_restart, _joined_model, _tidy
from toy_runtime.bench.hearing_set import CHINESE, ENGLISH
from toy_runtime.testing.speech import espeak_pcm


def words(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9' ]", " ", text.lower()).split())


def hanzi(text: str) -> str:
    return re.sub(r"[^\u4e00-\u9fff0-9]", "", text)


def test_a_repeating_tail_is_cut():
    assert _cut_repeats([1, 2, 3, 4, 5, 4, 5, 4, 5]) == [1, 2, 3, 4, 5]
    assert _cut_repeats([7, 8, 9, 7, 8, 9, 7, 8, 9]) == [7, 8, 9]
    assert _cut_repeats([1, 2, 3, 4]) == [1, 2, 3, 4]  # nothing repeats: unchanged


def test_a_tail_that_starts_the_utterance_over_is_cut():
    assert _cut_restart("Set the volume to 30. Set the") == "Set the volume to 30."
    assert _cut_restart("set the volume to 30. Set the volume to 30.") == "set the volume to 30."
    assert _cut_restart("把音量调到30。把音量") == "把音量调到30。"
    assert _cut_restart("Hi. How are you?") == "Hi. How are you?"  # a second sentence of its own stays


def test_chinese_text_is_simplified_and_unspaced():
    assert _tidy("把音量調到 三十", "zh") == "把音量调到三十"
    assert _tidy(" Turn it down ", "en") == "Turn it down"


def test_the_model_is_joined_once_and_a_torn_copy_is_replaced(tmp_path):
    folder = _joined_model(tmp_path)
    model = folder / "model.bin"
    size = model.stat().st_size
    assert size > 100_000_000 and (folder / "tokenizer.json").is_file()
    with open(model, "r+b") as f:
        f.truncate(1000)  # a copy cut short (a full disk, a crash before the rename)
    assert _joined_model(tmp_path) == folder and model.stat().st_size == size


@pytest.mark.parametrize("voice", ["en-us", "en-us+f3", "en-gb+m3"])
def test_english_in_other_voices_is_understood_twice_as_well_as_by_pocketsphinx(whisper, sphinx, voice):
    """The issue's target, on the same sentences in voices the toy never speaks with: at most half the word
    errors of the recognizer it replaces."""
    refs, hyps, sphinx_hyps = [], [], []
    for sentence in ENGLISH[:12]:
        pcm = espeak_pcm(sentence, voice)
        result = whisper.transcribe(pcm)
        assert result.language == "en", (sentence, result)
        sphinx.start_utterance()
        sphinx.accept(pcm)
        refs.append(sentence)
        hyps.append(words(result.text) or "-")
        sphinx_hyps.append(words(sphinx.finish()) or "-")
    assert jiwer.wer(refs, hyps) <= 0.5 * jiwer.wer(refs, sphinx_hyps), list(zip(refs, hyps))


def test_the_toys_own_voice_commands_come_through(whisper, speak16k):
    for sentence in ("turn the volume down", "goodbye", "what is the weather in london today"):
        assert words(whisper.transcribe(speak16k(sentence)).text) == sentence


def test_an_unsure_english_decode_is_looked_at_again_with_beams(whisper, tmp_path_factory, speak16k):
    # greedy heard these as "Where do I end so when it rains?" and "Kanjoufik Chinese", and knew it was unsure
    greedy_only = WhisperRecognizer(tmp_path_factory.mktemp("wc"), unsure_beam_size=1)
    for sentence, voice in (("where do ants go when it rains", "en-us+f3"), ("can you speak chinese", "en-gb+m3")):
        pcm = bytes(6400) + espeak_pcm(sentence, voice) + bytes(4800)
        looks = whisper.second_looks
        assert words(whisper.transcribe(pcm).text) == sentence and whisper.second_looks == looks + 1
        assert words(greedy_only.transcribe(pcm).text) != sentence and greedy_only.second_looks == 0
    looks = whisper.second_looks
    assert words(whisper.transcribe(speak16k("turn the volume down")).text) == "turn the volume down"
    assert whisper.second_looks == looks  # a sure decode is not done twice


def test_mandarin_is_heard_in_simplified_characters(whisper, speak_zh):
    refs, hyps = [], []
    for sentence in CHINESE[:16]:
        result = whisper.transcribe(speak_zh(sentence))
        assert result.language == "zh", (sentence, result)
        refs.append(sentence)
        hyps.append(hanzi(result.text) or "-")
    assert jiwer.cer(refs, hyps) <= 0.2, list(zip(refs, hyps))
    volume = whisper.transcribe(speak_zh("把音量调到三十")).text
    assert "音量" in volume and ("30" in volume or "三十" in volume), volume


def test_mandarin_beams_do_not_lengthen_the_shortest_command(whisper, speak_zh, tmp_path_factory):
    """Mandarin is decoded with beams ranked by their summed log-probability: ranked per token (CTranslate2's
    default), a longer hypothesis wins on a likely last token and "再见" came out "再见晨", so goodbye stopped ending
    the session. Heard at four alignments, as `bench hearing` hears its set."""
    from toy_runtime.bench.hearing import SHIFTS, in_room

    goodbye = speak_zh("再见")
    per_token = WhisperRecognizer(tmp_path_factory.mktemp("wz"), zh_beam_size=5, length_penalty=1.0)
    heard = [whisper.transcribe(in_room(goodbye, None, shift=shift)).text for shift in SHIFTS]
    assert all(hanzi(text) == "再见" for text in heard), heard
    lengthened = [per_token.transcribe(in_room(goodbye, None, shift=shift)).text for shift in SHIFTS]
    assert any(hanzi(text) != "再见" for text in lengthened), lengthened  # what the summed ranking prevents


def test_beams_ranked_by_their_sum_do_not_end_a_long_answer_at_once(whisper, zh_voice, tmp_path_factory):
    """Ranked by the sum, a hypothesis that ends at once can win: the toy's own answer, clause by clause with its
    pauses, was heard as "。" at the first alignment. A hypothesis that short for the speech is passed over."""
    import jiwer

    from toy_runtime.audio.resample import resample
    from toy_runtime.bench.hearing import SHIFTS, in_room, zh_key

    said = "好问题，我帮你查一下。我查到了，今天北京是晴天，很暖和。"
    gap = bytes(2 * 16000 * 3 // 10)
    answer = gap.join(resample(p.pcm, zh_voice.sample_rate_hz, 16000) for p in zh_voice.synthesize_blocking(said))
    answer += bytes(32000)
    for shift in SHIFTS:
        heard = whisper.transcribe(in_room(answer, None, shift=shift)).text
        assert jiwer.cer(zh_key(said), zh_key(heard) or "-") <= 0.3, (shift, heard)


class CountingEncoder:
    """The model, with the window of every encode recorded (in seconds: 100 feature frames a second)."""

    def __init__(self, model):
        self.model, self.windows_s = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def encode(self, features, **kw):
        self.windows_s.append(features.shape[-1] / 100)
        return self.model.encode(features, **kw)


def test_mandarin_is_heard_again_in_a_longer_window_and_english_is_not(tmp_path_factory, speak_zh, speak16k):
    """Mandarin is encoded again in an 8 s window once detected (beside a fan 11.5 -> 9.9 % of the characters
    wrong, in babble 17.3 -> 13.5 %); English keeps its 5 s window: every English turn waits for the decode. After
    a Mandarin utterance the next is encoded in the 8 s window first: Mandarin again needs no second encode."""
    recognizer = WhisperRecognizer(tmp_path_factory.mktemp("ww"))
    counting = recognizer._model = CountingEncoder(recognizer._model)
    assert hanzi(recognizer.transcribe(speak_zh("你叫什么名字")).text) == "你叫什么名字"
    assert len(counting.windows_s) == 2 and counting.windows_s[0] < 6 <= 8 <= counting.windows_s[1] < 9, \
        counting.windows_s
    counting.windows_s.clear()  # after Mandarin, Mandarin again: one encode, in Mandarin's window
    assert hanzi(recognizer.transcribe(speak_zh("你叫什么名字")).text) == "你叫什么名字"
    assert len(counting.windows_s) == 1 and 8 <= counting.windows_s[0] < 9, counting.windows_s
    counting.windows_s.clear()  # English after Mandarin: heard in Mandarin's window, decoded in its own
    assert words(recognizer.transcribe(speak16k("turn the volume down")).text) == "turn the volume down"
    assert len(counting.windows_s) == 2 and counting.windows_s[1] < 6 <= 8 <= counting.windows_s[0], \
        counting.windows_s
    counting.windows_s.clear()  # English after English: its own window only
    assert words(recognizer.transcribe(speak16k("turn the volume down")).text) == "turn the volume down"
    assert len(counting.windows_s) == 1 and counting.windows_s[0] < 6, counting.windows_s


def test_mandarin_the_detector_took_for_english_is_decoded_as_mandarin(tmp_path_factory, speak_zh, speak16k):
    """Told English, the decoder may still write the Chinese it hears: in babble "再见" was detected English and
    came out "再見" (traditional characters, answered in English). Such an utterance is decoded again as Mandarin.
    Here the detector always says English (a switch factor no score reaches); told English, this sentence came out
    in Chinese at all four alignments (others come out translated, "Bye.", and stay English: nothing to read)."""
    from toy_runtime.bench.hearing import SHIFTS, in_room

    deaf = WhisperRecognizer(tmp_path_factory.mktemp("wz"), switch_factor=1e12)
    said = speak_zh("明天早上八点提醒我刷牙")
    for shift in SHIFTS:
        result = deaf.transcribe(in_room(said, None, shift=shift))
        assert result.language == "zh" and hanzi(result.text) == "明天早上8点提醒我刷牙", (shift, result)
    assert deaf.mandarin_rescues == len(SHIFTS)
    english = deaf.transcribe(speak16k("turn the volume down"))
    assert english.language == "en" and deaf.mandarin_rescues == len(SHIFTS), english


def test_silence_and_noise_give_no_words(whisper):
    import numpy as np

    rng = np.random.default_rng(7)
    noise = (rng.normal(0, 300, 16000 * 2)).astype(np.int16).tobytes()  # -40 dBFS hiss, 2 s
    for pcm in (bytes(32000 * 2), noise):
        assert whisper.transcribe(pcm).text == ""


def test_a_fixed_language_is_not_detected(tmp_path_factory, speak_zh):
    fixed = WhisperRecognizer(tmp_path_factory.mktemp("wc"), language="en")
    assert fixed.transcribe(speak_zh("你叫什么名字")).language == "en"


def test_partials_when_asked(tmp_path_factory, speak16k):
    recognizer = WhisperRecognizer(tmp_path_factory.mktemp("wc"), partial_interval_ms=500)
    recognizer.start_utterance()
    pcm = speak16k("tell me a story about a rabbit")
    partials = [p for i in range(0, len(pcm), 3200) if (p := recognizer.accept(pcm[i:i + 3200]))]
    assert partials, "no partial over the utterance"
    assert "rabbit" in words(recognizer.finish())
