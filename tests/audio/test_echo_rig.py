"""The front end on the echo rig: the toy's answers, played through its speaker on the virtual card, come back into
its one mic 60 ms later and 6 dB down (a real PulseAudio loopback); a child (espeak-ng, a voice the toy never
speaks with) talks over one of them. Run through the runtime's own microphone, speaker, reference and canceller."""

from __future__ import annotations

import shutil

import pytest

from toy_runtime.bench.ears import EarsPlan, analyse, capture_on_rig
from toy_runtime.testing.services import unavailable


@pytest.fixture
def echo_card(sound_card):
    if shutil.which("espeak-ng") is None:
        unavailable("espeak-ng is not installed (apt install espeak-ng): the child's voice on the echo rig")
    module = sound_card.add_echo_path(delay_ms=60, gain_db=-6.0)
    try:
        yield sound_card
    finally:
        sound_card.remove_module(module)


async def test_the_toys_own_voice_is_cancelled_and_the_child_still_interrupts(echo_card, voice):
    result = await capture_on_rig(echo_card, EarsPlan(answers=4, overlap_every=2, silence_every=0), voice)
    figures = analyse(result)
    # Bounds a busy machine keeps (its underruns make the canceller re-learn the echo now and then; the
    # counts that vary from run to run — false barge-ins per 100 answers, the child's words — are the bench's):
    assert figures["echo_only_s"] > 5, figures
    # 58-72 dB on a quiet machine, 28 dB beside two compile loops, 14.6 dB once beside a second suite and a compile
    # loop (2026-12-04): 10 dB still tells a working canceller from none (~0 dB), which is what this test is for
    assert figures["erle_db"] >= 10, figures
    # without the canceller the VAD hears the toy in ~90 % of its frames; through it, a few at most
    assert figures["vad_speech_on_echo_raw"] > 0.5, figures
    assert figures["vad_speech_on_echo_clean"] < figures["vad_speech_on_echo_raw"] / 4, figures
    assert figures["barge_ins_detected"] != "0/2", figures  # the child can still interrupt


async def test_without_the_reference_the_toy_would_interrupt_itself(echo_card, voice):
    """The speaker not reporting what it plays: the same rig, the same canceller, no far end: the echo stays."""
    result = await capture_on_rig(echo_card, EarsPlan(answers=2, overlap_every=0, silence_every=0), voice,
                                  feed_reference=False)
    figures = analyse(result)
    assert figures["speech_starts_without_child"] >= 1, figures  # speech heard where only the toy was talking


async def test_doctor_measures_the_echo_path_after_its_reference(echo_card):
    from toy_runtime.config import load_settings
    from toy_runtime.doctor.ears import check_ears

    settings = load_settings(env={"TOY_AUDIO__INPUT_DEVICE": "pulse", "TOY_AUDIO__OUTPUT_DEVICE": "pulse"})
    verdict = await check_ears(settings)
    assert verdict.status == "OK", verdict
    assert "the recognizer hears speexdsp MDF" in verdict.detail, verdict  # [ears] recognizer_echo's default
    # the rig's 60 ms loopback (plus the card's own ~10 ms) comes back after the aligned reference
    delay = float(verdict.detail.split("comes back ")[1].split(" ms")[0])
    assert 40 <= delay <= 150, verdict.detail


async def test_doctor_says_when_the_speaker_never_reaches_the_mic(sound_card):
    from toy_runtime.config import load_settings
    from toy_runtime.doctor.ears import check_ears

    settings = load_settings(env={"TOY_AUDIO__INPUT_DEVICE": "pulse", "TOY_AUDIO__OUTPUT_DEVICE": "pulse"})
    verdict = await check_ears(settings)
    assert verdict.status == "WARN" and "did not come back" in verdict.detail, verdict
