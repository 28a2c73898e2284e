"""Test and demo speech is deterministic: one text, one waveform, so recognition results repeat run after run."""

from __future__ import annotations

import pytest

from toy_runtime.testing.speech import PhraseCache, is_deterministic

PHRASE = "tell me a story about a dragon"


def test_two_syntheses_of_one_text_are_byte_identical(voice):
    first = b"".join(p.pcm for p in voice.synthesize_blocking(PHRASE))
    second = b"".join(p.pcm for p in voice.synthesize_blocking(PHRASE))
    assert len(first) > 22050  # about a second and a half of speech, not an empty answer
    assert first == second


def test_a_second_voice_with_another_thread_count_says_it_identically(voice, speak):
    """What a fresh test process (or the demo) synthesizes is what this one did: no state, no thread effects."""
    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    other = PiperSynthesizer(deterministic=True, threads=1)
    try:
        assert b"".join(p.pcm for p in other.synthesize_blocking(PHRASE)) == speak(PHRASE).pcm
    finally:
        other.close()


def test_the_default_voice_is_not_deterministic_which_is_why_tests_switch_it_off(voice):
    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    lively = PiperSynthesizer(trim_heap=False)
    try:
        assert not is_deterministic(lively, PHRASE)
    finally:
        lively.close()
    assert is_deterministic(voice, PHRASE)


def test_each_phrase_is_synthesized_once_and_resampled_once(voice):
    phrases = PhraseCache(voice)
    clip = phrases.speak("hello there")
    assert phrases.speak("hello there") is clip and phrases.syntheses == 1
    pcm16k = phrases.speak_at("hello there", 16000)
    assert phrases.speak_at("hello there", 16000) is pcm16k and phrases.syntheses == 1
    assert len(pcm16k) == pytest.approx(len(clip.pcm) * 16000 / clip.sample_rate_hz, abs=64)
    phrases.speak("goodbye")
    assert phrases.syntheses == 2
