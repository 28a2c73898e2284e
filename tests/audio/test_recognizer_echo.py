"""The recognizer's copy of what the mic heard while the toy speaks: speexdsp's linear canceller (no residual
suppressor) beside AEC3, which keeps deciding for the VAD and barge-in. The child's first syllable over the toy must
reach the recognizer whole; the echo must still go; the filter must be told where the echo is."""

from __future__ import annotations

import re

import numpy as np
import pytest

from toy_runtime.adapters.speex_aec import SpeexEchoCanceller
from toy_runtime.audio.echo_reference import EchoReference
from toy_runtime.audio.echo_stage import EchoCancelledSource
from toy_runtime.fakes.audio import ListSource
from toy_runtime.fakes.echo import SubtractingCanceller
from toy_runtime.ports.audio import AudioFrame
from toy_runtime.ports.echo import EchoCanceller, LinearEchoCanceller

RATE = 16000
ECHO_LAG = 960  # samples: the echo's main reflection, 60 ms after its render
CHILD_AT = 4 * RATE  # the child starts speaking over the toy 4 s in, when both filters have converged


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, np.int16)


def room(seconds: int = 6, *, child: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The toy's voice (speech-like noise bursts), its echo (60 ms, two later reflections, -6 dB, a noise floor)
    and a child who speaks over it from `CHILD_AT` for a second: (render, mic, child)."""
    rng = np.random.default_rng(11)
    far = rng.normal(0, 4000, RATE * seconds) * np.repeat(rng.random(seconds * 10) > 0.3, RATE // 10)
    h = np.zeros(1200)
    h[ECHO_LAG], h[1100], h[1180] = 0.5, 0.15, 0.05
    echo = np.convolve(far, h)[: len(far)] + rng.normal(0, 20, len(far))
    voice = np.zeros(len(far))
    if child:
        voice[CHILD_AT : CHILD_AT + RATE] = rng.normal(0, 2000, RATE)
    mic = np.clip(echo + voice, -32768, 32767).astype(np.int16)
    return far.astype(np.int16), mic, voice


def through(canceller: EchoCanceller, render: np.ndarray, mic: np.ndarray) -> np.ndarray:
    out = [samples(canceller.process(mic[i : i + 160].tobytes(), render[i : i + 160].tobytes()))
           for i in range(0, len(mic) - 159, 160)]
    return np.concatenate(out).astype(np.float64)[canceller.delay_samples :]


def played_through(stage: EchoCancelledSource, reference: EchoReference, render: np.ndarray,
                   mic: np.ndarray) -> list[AudioFrame]:
    """Each 20 ms mic frame through the stage, the speaker reporting its render just before (as it does live: the
    reference keeps only the last seconds)."""
    frames = []
    for i in range(0, len(mic) - 319, 320):
        for k in (i, i + 160):
            reference.played(render[k : k + 160].tobytes(), RATE, 10.0 + k / RATE)
        frames.append(stage.clean(AudioFrame(mic[i : i + 320].tobytes(), RATE, 10.0 + i / RATE)))
    return frames


def child_kept_db(heard: np.ndarray, child: np.ndarray, span_s: float = 0.25) -> tuple[float, float]:
    """Over the child's first `span_s`: (its level in `heard` against the child alone, dB; the child against
    everything else in `heard`, dB)."""
    s = slice(CHILD_AT, CHILD_AT + int(span_s * RATE))
    level = 10 * np.log10((np.sum(heard[s] ** 2) + 1e-9) / np.sum(child[s] ** 2))  # a gated copy: -inf, kept finite
    clean = 10 * np.log10(np.sum(child[s] ** 2) / np.sum((heard[s] - child[s]) ** 2))
    return float(level), float(clean)


def test_the_linear_canceller_keeps_the_port():
    speex = SpeexEchoCanceller(RATE)
    assert isinstance(speex, EchoCanceller) and isinstance(speex, LinearEchoCanceller)
    assert len(speex.process(bytes(320), bytes(320))) == 320
    assert speex.cancels_echo and not speex.suppresses_noise and speex.delay_samples == 0
    assert "speexdsp" in speex.describe()
    with pytest.raises(ValueError, match="10 ms"):
        speex.process(bytes(640), bytes(640))
    assert not isinstance(SubtractingCanceller(RATE), LinearEchoCanceller)  # it knows its path: no lead to take


@pytest.mark.parametrize("lead", [0, ECHO_LAG - 320], ids=["no-lead", "lead-from-the-measured-delay"])
def test_the_linear_canceller_removes_a_synthetic_echo(lead):
    """The echo path of the AEC3 test: ≥ 20 dB gone after 2 s within the 200 ms filter's reach; more with the
    render led to 20 ms before the echo (the filter's taps spent where the echo is)."""
    render, mic, _ = room(child=False)
    speex = SpeexEchoCanceller(RATE)
    speex.set_render_lead(lead)
    out = through(speex, render, mic)
    tail = slice(2 * RATE, len(out))
    erle = 10 * np.log10(np.mean(mic[tail].astype(float) ** 2) / (np.mean(out[tail] ** 2) + 1e-3))
    assert erle >= (25 if lead else 20), erle


def test_a_lead_moved_mid_stream_is_a_pure_delay_of_the_render():
    speex = SpeexEchoCanceller(RATE)
    heard: list[bytes] = []
    speex._lib = _Recording(speex._lib, heard)
    ramp = np.arange(160 * 6, dtype=np.int16)
    speex.process(bytes(320), ramp[:160].tobytes())
    speex.set_render_lead(200)
    speex.process(bytes(320), ramp[160:320].tobytes())
    speex.process(bytes(320), ramp[320:480].tobytes())
    speex.set_render_lead(40)
    speex.process(bytes(320), ramp[480:640].tobytes())
    played = np.concatenate([samples(h) for h in heard])
    assert list(played[:160]) == list(range(160))  # no lead: the render as it came
    assert not played[160:360].any()  # led by 200: silence first (nothing older was kept) …
    assert list(played[360:480]) == list(range(160, 280))  # … then the render 200 samples late
    # shortened to 40: the 160 oldest held samples are skipped, and the render is 40 late from then on
    assert list(played[480:640]) == list(range(440, 600))


class _Recording:
    """speexdsp's functions, recording the render each call was handed."""

    def __init__(self, lib, heard: list[bytes]) -> None:
        self._lib, self._heard = lib, heard

    def speex_echo_cancellation(self, state, capture, played, out):
        self._heard.append(bytes(played))
        return self._lib.speex_echo_cancellation(state, capture, played, out)

    def __getattr__(self, name):
        return getattr(self._lib, name)


def test_aec3_weakens_the_child_over_the_toy_and_the_linear_canceller_keeps_it():
    """Why the recognizer hears speexdsp: over the toy, AEC3's suppressor takes the child's first quarter second
    down by tens of dB (Whisper heard "stop talking please" as "up talking please"); the linear filter leaves it at
    its level, well above what is left of the echo."""
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    render, mic, child = room()
    aec3_level, _ = child_kept_db(through(WebRtcAudioProcessor(RATE, noise_suppression=False), render, mic), child)
    speex = SpeexEchoCanceller(RATE)
    speex.set_render_lead(ECHO_LAG - 320)
    level, clean = child_kept_db(through(speex, render, mic), child)
    assert aec3_level < -6, aec3_level
    assert abs(level) < 1 and clean > 10, (level, clean)


async def test_the_stage_feeds_the_recognizer_from_the_linear_canceller_led_by_the_measured_delay():
    """The runtime's stage, both cancellers real: the VAD's copy is AEC3's (the child all but gone in its first
    quarter second), the recognizer's is speexdsp's (the child whole), and the linear filter's render was led to
    20 ms before the echo the stage measured."""
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    render, mic, child = room()
    reference = EchoReference(RATE, lead_ms=0)
    speex = SpeexEchoCanceller(RATE)
    aec3 = WebRtcAudioProcessor(RATE, noise_suppression=False)
    stage = EchoCancelledSource(ListSource(mic.tobytes(), frame_ms=20), aec3, reference, recognizer_canceller=speex)
    frames = played_through(stage, reference, render, mic)
    assert stage.delay_monitor is not None and stage.delay_monitor.delay_samples == ECHO_LAG
    assert speex.render_lead == ECHO_LAG - 320
    for_vad = np.concatenate([samples(f.pcm) for f in frames]).astype(np.float64)[aec3.delay_samples :]
    for_asr = np.concatenate([samples(f.for_recognizer) for f in frames]).astype(np.float64)[aec3.delay_samples :]
    assert child_kept_db(for_vad, child)[0] < -6
    level, clean = child_kept_db(for_asr, child)
    assert abs(level) < 1 and clean > 10, (level, clean)
    assert "the recognizer hears speexdsp MDF" in stage.describe()


async def test_without_a_linear_canceller_the_recognizer_hears_aec3():
    render, mic, child = room()
    reference = EchoReference(RATE, lead_ms=0)
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    stage = EchoCancelledSource(ListSource(mic.tobytes(), frame_ms=20), WebRtcAudioProcessor(RATE, noise_suppression=False),
                                reference)
    frames = played_through(stage, reference, render, mic)
    for_asr = np.concatenate([samples(f.for_recognizer) for f in frames]).astype(np.float64)[
        stage.canceller.delay_samples :]
    assert child_kept_db(for_asr, child)[0] < -6  # what the recognizer heard before: the first syllable lost


# -- where it is chosen: [ears] recognizer_echo ----------------------------------------------------------------


@pytest.mark.parametrize("choice", ["linear", "aec3"])
def test_run_installs_the_recognizers_canceller_that_ears_asks_for(choice):
    from toy_runtime.app.ears import build_ears, load_canceller
    from toy_runtime.config import load_settings

    settings = load_settings(None, env={"TOY_EARS__RECOGNIZER_ECHO": choice})
    ears = build_ears(settings, ListSource(b""))
    load_canceller(settings, ears)
    stage = ears.echo
    assert isinstance(stage, EchoCancelledSource)
    assert isinstance(stage.recognizer_canceller, SpeexEchoCanceller) == (choice == "linear")
    assert ("the recognizer hears speexdsp" in stage.describe()) == (choice == "linear")


def test_the_default_is_linear_and_without_echo_cancellation_there_is_none():
    from toy_runtime.app.ears import build_ears, load_canceller
    from toy_runtime.config import load_settings

    assert load_settings(None, env={}).ears.recognizer_echo == "linear"
    settings = load_settings(None, env={"TOY_EARS__ECHO_CANCELLATION": "false"})
    ears = build_ears(settings, ListSource(b""))
    load_canceller(settings, ears)
    assert ears.echo.recognizer_canceller is None


def _no_speexdsp(monkeypatch):
    import toy_runtime.adapters.speex_aec as speex_aec

    def missing():
        raise OSError("speexdsp's library is missing (libspeexdsp.so.1: cannot open shared object file): "
                      "apt-get install libspeexdsp1")

    monkeypatch.setattr(speex_aec, "load_speexdsp", missing)


def test_a_missing_speexdsp_is_a_start_error_naming_the_setting(monkeypatch):
    from toy_runtime.app.ears import build_ears
    from toy_runtime.config import load_settings

    _no_speexdsp(monkeypatch)
    with pytest.raises(ValueError, match=r'recognizer_echo = "linear": .*apt-get install libspeexdsp1.*"aec3"'):
        build_ears(load_settings(None, env={}), ListSource(b""))
    build_ears(load_settings(None, env={"TOY_EARS__RECOGNIZER_ECHO": "aec3"}), ListSource(b""))  # not needed then


async def test_doctor_fails_on_a_missing_speexdsp_with_the_fix(monkeypatch):
    from toy_runtime.config import load_settings
    from toy_runtime.doctor.ears import check_ears

    _no_speexdsp(monkeypatch)
    verdict = await check_ears(load_settings(None, env={}))
    assert verdict.status == "FAIL" and "recognizer_echo" in verdict.detail, verdict
    assert "libspeexdsp1" in str(verdict), verdict


def test_an_unknown_choice_is_a_config_error():
    from toy_runtime.config import load_settings

    with pytest.raises(Exception, match="recognizer_echo"):
        load_settings(None, env={"TOY_EARS__RECOGNIZER_ECHO": "speex"})


def test_every_install_path_installs_the_library_the_default_needs():
    """The default loads libspeexdsp1 at start: the Pi installer, CI and README's apt line all install it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert re.search(r"^\s+libspeexdsp1\b", (root / "scripts/install-pi.sh").read_text(), re.M)
    assert "libspeexdsp1" in (root / ".ci/run").read_text()
    assert "libspeexdsp1" in (root / "README.md").read_text()


async def test_with_the_toy_long_silent_the_recognizer_hears_aec3_as_before():
    """Nothing to cancel: Whisper heard the rig's clean "can you tell me" as nothing at 5 of 16 alignments from
    the raw mic or MDF's copy, and at none from AEC3's. Within an echo's reach of the toy's voice the recognizer
    hears the linear canceller (as late as AEC3's output: one moment per frame); 0.6 s after it, AEC3's output."""
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor
    from toy_runtime.audio.echo_probe import RecordingCanceller

    rng = np.random.default_rng(5)
    render = np.zeros(RATE * 3, np.int16)
    render[: RATE // 2] = rng.normal(0, 3000, RATE // 2).astype(np.int16)  # the toy speaks for 0.5 s, then stops
    mic = rng.normal(0, 2000, RATE * 3).astype(np.int16)  # a child (no echo on this path: it is about the copy)
    aec3 = RecordingCanceller(WebRtcAudioProcessor(RATE, noise_suppression=False))
    stage = EchoCancelledSource(ListSource(mic.tobytes(), frame_ms=20), aec3, EchoReference(RATE, lead_ms=0),
                                recognizer_canceller=SpeexEchoCanceller(RATE))
    frames = played_through(stage, stage.reference, render, mic)
    heard = np.concatenate([samples(f.for_recognizer) for f in frames])
    by_aec3 = np.concatenate([samples(out) for out in aec3.outputs])
    assert not np.array_equal(heard[RATE // 2 : RATE], by_aec3[RATE // 2 : RATE])  # the linear canceller's
    assert np.array_equal(heard[int(1.2 * RATE) :], by_aec3[int(1.2 * RATE) :])  # long silent: AEC3's
    # the linear copy comes out as late as AEC3's: the same child, the same moment
    lag = aec3.delay_samples
    assert lag > 0
    corr = [float(np.dot(heard[2000 + k : 6000 + k].astype(float), mic[2000:6000].astype(float))) for k in range(200)]
    assert int(np.argmax(corr)) == lag


def test_before_the_toy_ever_spoke_the_recognizer_hears_aec3():
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor
    from toy_runtime.audio.echo_probe import RecordingCanceller

    mic = np.random.default_rng(6).normal(0, 2000, RATE).astype(np.int16)
    aec3 = RecordingCanceller(WebRtcAudioProcessor(RATE, noise_suppression=False))
    stage = EchoCancelledSource(ListSource(mic.tobytes(), frame_ms=20), aec3, EchoReference(RATE, lead_ms=0),
                                recognizer_canceller=SpeexEchoCanceller(RATE))
    frames = played_through(stage, stage.reference, np.zeros_like(mic), mic)
    assert b"".join(f.for_recognizer for f in frames) == b"".join(aec3.outputs)
