"""The capture front end's parts without a sound card: the speaker's reference on the capture clock, the stage that
feeds it to a canceller with each mic frame, its residual gate, the wake-word stage, and what an interrupted
answer leaves in the history."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from toy_runtime.audio.echo_reference import EchoReference
from toy_runtime.audio.echo_stage import EchoCancelledSource
from toy_runtime.audio.front_end import FrontEndSource
from toy_runtime.audio.wake_stage import WakeWordSource
from toy_runtime.fakes.audio import ListSource
from toy_runtime.fakes.echo import PassThroughCanceller, SubtractingCanceller
from toy_runtime.ports.audio import AudioFrame
from toy_runtime.ports.echo import EchoCanceller
from toy_runtime.session.items import Speech
from toy_runtime.session.speaker import AnswerMarks, TurnSpeaker, heard_part

RATE = 16000


def ramp(n: int, start: int = 0) -> bytes:
    """int16 samples start, start+1, … (each sample says where it came from)."""
    return (np.arange(start, start + n) % 30000).astype(np.int16).tobytes()


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, np.int16)


# -- EchoReference ------------------------------------------------------------------------------------------


def test_the_reference_hands_out_what_was_sounding_at_the_capture_time():
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(10):  # 10 blocks of 10 ms, the first heard at t = 100.0 s
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    got = samples(ref.take(100.025, 160))
    assert got[0] == 400 and got[-1] == 559  # 25 ms in: sample 400 onwards


def test_consecutive_frames_read_consecutive_samples_whatever_the_timestamp_jitter():
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(50):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    jitter = [0.0, 0.004, -0.003, 0.006, -0.005, 0.002]
    out = [samples(ref.take(100.0 + 0.02 * i + jitter[i], 320)) for i in range(6)]
    joined = np.concatenate(out)
    # without the read cursor the jitter would skip or repeat ~100 samples between frames
    assert np.array_equal(joined, np.arange(0, 1920)), np.flatnonzero(np.diff(joined) != 1)[:5]


def test_clock_drift_never_moves_the_render():
    """The capture's sample clock runs 0.03 % fast against the monotonic clock (0.028 % measured on the virtual
    card) while the echo path, in samples, stays put. The render must stay sample-continuous: a jump when the drift
    added up, single-sample slips, or a few ms put right between answers each made AEC3 learn the echo again, with
    false barge-ins (measured on the rig)."""
    ref = EchoReference(RATE, lead_ms=0)
    k, reads = 0, []
    for i in range(10_000):  # 200 s
        t = 100.0 + 0.02 * i * 1.0003
        while 100.0 + 0.01 * k < t + 0.1:
            ref.played(ramp(160, (160 * k) % 30000) if i % 500 < 400 else bytes(320), RATE, 100.0 + 0.01 * k)
            k += 1
        reads.append(samples(ref.take(t, 320)))
    first = np.concatenate(reads[:400]).astype(int)
    assert set((np.diff(first) % 30000).tolist()) == {1}
    # every loud stretch continues the count exactly where the samples say, 60 ms of drift or not
    offsets = {int(r[0]) - (320 * i) % 30000 for i, r in enumerate(reads) if 10 <= i % 500 < 390}
    assert len({o % 30000 for o in offsets}) == 1, sorted(offsets)[:5]
    assert ref.read_resyncs == 0 and ref.resyncs == 0


def test_silence_the_speaker_played_while_it_ran_dry_is_put_into_the_timeline():
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(10):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    # the device ran dry for 30 ms: the next block is heard 30 ms later than the count says
    ref.played(ramp(160, 1600), RATE, 100.13, after_underflow=True)
    assert samples(ref.take(100.0, 1600))[-1] == 1599  # the first 100 ms, as played
    got = samples(ref.take(100.1, 480))
    assert not got.any()  # the 30 ms of silence the device played
    assert samples(ref.take(100.13, 160))[0] == 1600 and ref.underflow_gaps == 1 and ref.resyncs == 0
    assert list(ref.gap_ms) == [30.0]


def test_a_capture_gap_moves_the_read_position():
    ref = EchoReference(RATE, lead_ms=0, resync_ms=30)
    for k in range(100):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    ref.take(100.0, 320)
    got = samples(ref.take(100.5, 320))  # half a second later (frames were dropped): re-anchored there
    assert got[0] == 8000


def test_audio_lost_before_the_canceller_is_skipped_in_the_render_exactly():
    """A dropped 20 ms frame: its timestamp says little (jitter, the 500 ms resync), its index says exactly."""
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(100):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    assert samples(ref.take(100.0, 320, 0))[0] == 0
    assert samples(ref.take(100.02, 320, 320))[0] == 320
    # frame 640 was lost; the next one's timestamp is off by jitter, as PortAudio's are
    assert samples(ref.take(100.063, 320, 960))[0] == 960 and ref.capture_gaps == 1
    assert samples(ref.take(100.08, 320, 1280))[0] == 1280
    # without the index the read position would have stayed put (the old behaviour): 20 ms behind its echo
    blind = EchoReference(RATE, lead_ms=0)
    for k in range(100):
        blind.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    blind.take(100.0, 320)
    blind.take(100.02, 320)
    assert samples(blind.take(100.063, 320))[0] == 640


def test_a_capture_index_that_starts_again_re_anchors_on_the_timestamp():
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(100):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    ref.take(100.0, 320, 5000)
    assert samples(ref.take(100.1, 320, 0))[0] == 1600  # a new capture stream: its own timestamp


def test_the_lead_reads_slightly_ahead_of_the_capture():
    ref = EchoReference(RATE, lead_ms=10)
    for k in range(10):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    assert samples(ref.take(100.0, 160))[0] == 160


def test_nothing_played_is_silence_and_a_pause_in_playback_is_silence_too():
    ref = EchoReference(RATE, lead_ms=0)
    assert not samples(ref.take(5.0, 160)).any()
    ref.played(ramp(160, 1), RATE, 100.0)
    ref.played(ramp(160, 1), RATE, 101.0)  # the stream stopped for a second (a replugged speaker)
    assert samples(ref.take(101.0, 160))[0] == 1
    assert ref.resyncs == 1
    assert not samples(ref.take(100.4, 160)).any()  # the second it was away: silence


def test_a_speaker_at_another_rate_is_resampled_onto_the_capture_clock():
    ref = EchoReference(RATE, lead_ms=0)
    t = np.arange(22050) / 22050
    tone = (8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16).tobytes()
    for k in range(50):
        ref.played(tone[k * 882 : (k + 1) * 882], 22050, 50.0 + 0.02 * k)  # 441 samples: 20 ms
    got = samples(ref.take(50.3, 1600)).astype(float)
    expected = 8000 * np.sin(2 * np.pi * 440 * (0.3 + np.arange(1600) / RATE))
    assert np.corrcoef(got, expected)[0, 1] > 0.99 and ref.resyncs == 0


# -- EchoCancelledSource -------------------------------------------------------------------------------------


def echo_scene(frames: int = 50, *, feed: bool = True, child_from: int | None = None):
    """A speaker playing noise that comes back into the mic unchanged, at the same moment (a perfect echo path)."""
    rng = np.random.default_rng(3)
    played = (rng.normal(0, 3000, frames * 320)).astype(np.int16)
    child = (rng.normal(0, 2000, frames * 320)).astype(np.int16)
    mic = played.astype(np.int32).copy()
    if child_from is not None:
        mic[child_from * 320 :] += child[child_from * 320 :]
    ref = EchoReference(RATE, lead_ms=0)
    if feed:
        for k in range(frames * 2):
            ref.played(played[k * 160 : (k + 1) * 160].tobytes(), RATE, 10.0 + 0.01 * k)
    source = ListSource(np.clip(mic, -32768, 32767).astype(np.int16).tobytes(), frame_ms=20)
    return played, child, ref, source


async def collect(stage, n: int) -> list[AudioFrame]:
    out = []
    async for frame in stage:
        out.append(frame)
        if len(out) == n:
            break
    return out


def retimed(frame: AudioFrame, index: int) -> AudioFrame:
    return AudioFrame(frame.pcm, frame.sample_rate_hz, 10.0 + 0.02 * index)


async def test_the_stage_gives_each_mic_frame_its_moments_reference():
    played, _, ref, source = echo_scene()
    stage = EchoCancelledSource(source, SubtractingCanceller(RATE), ref)
    await source.start()
    frames = [f async for f in source][:50]
    cleaned = [stage.clean(retimed(f, i)) for i, f in enumerate(frames)]
    assert all(not samples(c.pcm).any() for c in cleaned)  # the echo, exactly removed
    assert stage.stats.render_frames == 100 and stage.stats.erle_db > 60
    assert "reference fed" in stage.describe()


async def test_without_the_reference_the_echo_stays():
    _, _, ref, source = echo_scene(feed=False)
    stage = EchoCancelledSource(source, SubtractingCanceller(RATE), ref)
    await source.start()
    frames = [f async for f in source][:50]
    cleaned = [stage.clean(retimed(f, i)) for i, f in enumerate(frames)]
    assert np.mean([np.abs(samples(c.pcm)).mean() for c in cleaned]) > 1000
    assert stage.stats.render_frames == 0 and "no reference yet" in stage.describe()


class LeakyCanceller(SubtractingCanceller):
    """Leaves 1 % of the echo (-40 dB): the residual a real canceller leaves, which the gate turns to silence."""

    def __init__(self) -> None:
        super().__init__(RATE, gain=0.99)


async def test_the_residual_gate_silences_leftover_echo_but_never_the_child():
    played, child, ref, source = echo_scene(child_from=25)
    stage = EchoCancelledSource(source, LeakyCanceller(), ref)
    await source.start()
    frames = [f async for f in source][:50]
    cleaned = [samples(stage.clean(retimed(f, i)).pcm) for i, f in enumerate(frames)]
    assert all(not c.any() for c in cleaned[:25])  # echo only: residual gated to digital silence
    for i in range(25, 50):  # the child over the toy: passed through, whole
        expected = child[i * 320 : (i + 1) * 320].astype(float) + 0.01 * played[i * 320 : (i + 1) * 320]
        assert np.allclose(cleaned[i], expected, atol=2)
    assert stage.gated == 50


class HalvingSuppressor(PassThroughCanceller):
    """Stands in for noise suppression: every frame at half its amplitude (the recognizer must not get this)."""

    suppresses_noise = True

    def process(self, capture: bytes, render: bytes) -> bytes:
        assert not any(render)  # noise suppression runs without a far end
        return (samples(capture) // 2).astype(np.int16).tobytes()


async def test_with_a_suppressor_the_recognizer_hears_the_echo_cancelled_audio_before_it():
    played, child, ref, source = echo_scene(child_from=25)
    stage = EchoCancelledSource(source, LeakyCanceller(), ref, suppressor=HalvingSuppressor(RATE))
    await source.start()
    frames = [stage.clean(retimed(f, i)) for i, f in enumerate([f async for f in source][:50])]
    for i in (30, 49):  # the child over the toy
        expected = child[i * 320 : (i + 1) * 320].astype(float) + 0.01 * played[i * 320 : (i + 1) * 320]
        assert np.allclose(samples(frames[i].for_recognizer), expected, atol=2)  # not suppressed
        assert np.allclose(samples(frames[i].pcm), expected / 2, atol=2)  # the VAD's copy is
    # the residual gate silences the VAD's copy of the echo-only frames, not the recognizer's: it hears what the
    # canceller left (a child's soft first sound over the toy is gated with the residue)
    for i in range(25):
        assert not samples(frames[i].pcm).any()
        assert np.allclose(samples(frames[i].for_recognizer), 0.01 * played[i * 320 : (i + 1) * 320], atol=2)
    assert "noise suppression: on (the recognizer hears it before)" in stage.describe()


async def test_without_a_suppressor_the_recognizer_still_hears_what_the_gate_silenced():
    played, child, ref, source = echo_scene(child_from=25)
    stage = EchoCancelledSource(source, LeakyCanceller(), ref)
    await source.start()
    frames = [stage.clean(retimed(f, i)) for i, f in enumerate([f async for f in source][:50])]
    assert not samples(frames[10].pcm).any() and samples(frames[10].for_recognizer).any()  # gated for the VAD only
    assert frames[30].for_recognizer == frames[30].pcm  # the child, not gated: one sound for both


async def test_frames_leave_dated_by_what_they_carry():
    """A canceller 10 ms late and a suppressor 5 ms late: each frame comes out 15 ms earlier in date than the mic
    frame it came out with (it carries sound from then), and the front end's slot says so to the listener."""
    _, _, ref, source = echo_scene(feed=False)
    late = SubtractingCanceller(RATE, delay_samples=160)
    stage = EchoCancelledSource(source, late, ref, suppressor=DelayingSuppressor(RATE, 80))
    assert stage.delay_s == pytest.approx(0.015)
    mic = [retimed(AudioFrame(ramp(320, 320 * i), RATE, 0.0), i) for i in range(4)]
    out = [stage.clean(f) for f in mic]
    assert [f.timestamp_s for f in out] == pytest.approx([f.timestamp_s - 0.015 for f in mic])
    heard = np.concatenate([samples(f.pcm) for f in out])
    said = np.concatenate([samples(f.pcm) for f in mic])
    assert np.array_equal(heard[240:], said[: len(said) - 240])  # the sound is 15 ms (240 samples) late, indeed
    slot = FrontEndSource(source)
    assert slot.delay_s == 0.0  # nothing installed: nothing late
    slot.install(stage)
    assert slot.delay_s == pytest.approx(0.015)
    assert WakeWordSource(slot, FiresOnLoud(), lambda _at: None).delay_s == pytest.approx(0.015)  # seen through


class DelayingSuppressor(PassThroughCanceller):
    """Hands every sample on `delay_samples` late, as WebRTC's noise suppressor does (6 ms at 16 kHz)."""

    def __init__(self, sample_rate_hz: int, delay_samples: int) -> None:
        super().__init__(sample_rate_hz)
        self.delay_samples = delay_samples
        self._held = bytes(2 * delay_samples)

    def process(self, capture: bytes, render: bytes) -> bytes:
        self._held += capture
        out, self._held = self._held[: len(capture)], self._held[len(capture):]
        return out


async def test_the_pass_through_changes_nothing_and_gates_nothing():
    _, _, ref, source = echo_scene()
    stage = EchoCancelledSource(source, PassThroughCanceller(RATE), ref)
    await source.start()
    frames = [f async for f in source][:10]
    assert [stage.clean(f).pcm for f in frames] == [f.pcm for f in frames] and stage.gated == 0


def test_the_fakes_and_the_adapter_keep_the_port():
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    for canceller in (PassThroughCanceller(RATE), SubtractingCanceller(RATE), WebRtcAudioProcessor(RATE)):
        assert isinstance(canceller, EchoCanceller)
        out = canceller.process(bytes(320), bytes(320))
        assert len(out) == 320 and canceller.describe()


@pytest.mark.parametrize("flags", [dict(noise_suppression=False), dict(echo_cancellation=False, high_pass_filter=False),
                                   dict(), dict(echo_cancellation=False, noise_suppression=False)],
                         ids=["aec3", "noise-suppression", "both", "high-pass-only"])
def test_the_webrtc_module_declares_the_delay_it_has(flags):
    """Clicks through the very instance the runtime uses: each comes out exactly `delay_samples` later (AEC3 and
    the suppressor delay their output; the high-pass filter alone does not)."""
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    apm = WebRtcAudioProcessor(RATE, **flags)
    clicks = np.zeros(RATE, np.int16)
    clicks[RATE // 2 :: 1601] = 20000  # a click every ~100 ms in the second half (the filters settle in the first)
    out = np.concatenate([samples(apm.process(clicks[i : i + 160].tobytes(), bytes(320)))
                          for i in range(0, RATE, 160)]).astype(np.float64)
    scores = [float(np.dot(out[RATE // 2 + lag : RATE - 800 + lag], clicks[RATE // 2 : RATE - 800].astype(float)))
              for lag in range(800)]
    assert int(np.argmax(scores)) == apm.delay_samples
    assert (apm.delay_samples > 0) == (apm.cancels_echo or apm.suppresses_noise)


def test_the_webrtc_canceller_refuses_a_frame_that_is_not_10_ms():
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    with pytest.raises(ValueError, match="10 ms"):
        WebRtcAudioProcessor(RATE).process(bytes(640), bytes(640))


def test_the_webrtc_canceller_removes_a_synthetic_echo():
    """AEC3 on a fixed echo path (60 ms, two reflections, -6 dB) with no delay hint: ≥ 25 dB gone after 2 s."""
    from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor

    rng = np.random.default_rng(11)
    # speech-like: noise bursts with pauses, so the canceller sees onsets as in speech
    far = rng.normal(0, 4000, RATE * 6) * np.repeat(rng.random(60) > 0.3, RATE // 10)
    h = np.zeros(1200)
    h[960], h[1100], h[1180] = 0.5, 0.15, 0.05
    echo = np.convolve(far, h)[: len(far)] + rng.normal(0, 20, len(far))
    apm = WebRtcAudioProcessor(RATE, noise_suppression=False)
    out = np.concatenate([samples(apm.process(np.clip(echo[i : i + 160], -32768, 32767).astype(np.int16).tobytes(),
                                              far[i : i + 160].astype(np.int16).tobytes()))
                          for i in range(0, len(far) - 160, 160)])
    tail = slice(2 * RATE, len(out))
    erle = 10 * np.log10(np.mean(echo[tail] ** 2) / (np.mean(out[tail].astype(float) ** 2) + 1e-3))
    assert erle >= 25, erle


# -- the wake-word stage -------------------------------------------------------------------------------------


class FiresOnLoud:
    """A detector that fires on the first frame louder than 1000 (RMS)."""

    name = "loud"

    def __init__(self) -> None:
        self.fed = 0
        self.resets = 0

    def process(self, pcm: bytes) -> bool:
        self.fed += 1
        return float(np.sqrt(np.mean(samples(pcm).astype(float) ** 2))) > 1000

    def reset(self) -> None:
        self.resets += 1


async def test_the_wake_stage_fires_once_then_waits_to_be_armed_again():
    loud = (np.full(320, 3000)).astype(np.int16).tobytes()
    source = ListSource([bytes(640), loud, loud, bytes(640), loud], frame_ms=20)
    woke: list[float] = []
    detector = FiresOnLoud()
    stage = WakeWordSource(source, detector, woke.append)
    await stage.start()
    frames = await collect(stage, 3)
    assert len(woke) == 1 and not stage.armed and stage.detections == 1
    assert [f.pcm for f in frames] == [bytes(640), loud, loud]  # frames pass through unchanged
    fed = detector.fed
    stage.arm(True)
    await collect(stage, 2)
    assert detector.fed == fed + 2 and len(woke) == 2


# -- what an interrupted answer leaves ---------------------------------------------------------------------


def test_heard_part_keeps_whole_words_in_proportion():
    assert heard_part("one two three four", 0.5) == "one two…"
    assert heard_part("one two three four", 1.0) == "one two three four"
    assert heard_part("one two three four", 0.1) == ""
    assert heard_part("好的，我们来讲一个故事", 0.5) == "好的，我们…"


class _NoSink:
    pass


def test_the_speaker_reports_what_sounded_before_the_stop():
    speaker = TurnSpeaker.__new__(TurnSpeaker)  # only the bookkeeping: no synthesizer or sink needed
    speaker.marks = {
        0: AnswerMarks(first_audio_at=10.0, queued=[(Speech(0, "Hmm, let me think.", kind="holding"), 1.0)]),
        1: AnswerMarks(first_audio_at=12.0, queued=[(Speech(1, "Once upon a time."), 1.0),
                                                    (Speech(1, "A fox ran to the river to drink."), 2.0)]),
        2: AnswerMarks(first_audio_at=None, queued=[(Speech(2, "I turned it down."), 1.0)]),
    }
    heard = speaker.heard(14.0)
    assert [s.text for s in heard] == ["Hmm, let me think.", "Once upon a time.", "A fox ran to…"]
    assert speaker.heard(11.0)[-1].kind == "holding" and len(speaker.heard(11.0)) == 1
    assert speaker.heard(9.0) == []


def test_barge_in_follows_echo_cancellation_unless_set():
    from toy_runtime.config import load_settings

    assert load_settings(env={}).barge_in is True
    assert load_settings(env={"TOY_EARS__ECHO_CANCELLATION": "false"}).barge_in is False
    assert load_settings(env={"TOY_EARS__ECHO_CANCELLATION": "false", "TOY_SESSION__BARGE_IN": "true"}).barge_in
    assert load_settings(env={"TOY_SESSION__BARGE_IN": "false"}).barge_in is False


async def test_listener_restart_drops_the_utterance_that_carried_the_wake_word():
    from toy_runtime.audio.endpointer import EndpointerConfig
    from toy_runtime.audio.listener import Listener, Utterance, UtteranceDiscarded
    from toy_runtime.fakes.audio import ScriptedASR, ScriptedVAD, silence, tone

    pcm = silence(300) + tone(600) + silence(100) + tone(600) + silence(800)
    source = ListSource(pcm, frame_ms=20)
    listener = Listener(source, ScriptedVAD(), ScriptedASR(["okay nabu turn it down", "turn it down"]),
                        EndpointerConfig(hangover_ms=300, min_utterance_ms=100, start_ms=40))
    events = []
    await source.start()
    restarted = False
    async for event in listener.events():
        events.append(event)
        if not restarted and listener.endpointer.in_speech:
            listener.restart()  # the wake word was heard inside the first burst
            restarted = True
    kinds = [type(e).__name__ for e in events]
    assert any(isinstance(e, UtteranceDiscarded) and e.reason == "wake_word" for e in events), kinds
    assert len([e for e in events if isinstance(e, Utterance)]) >= 1
    await listener.aclose()


# -- a render the speaker has not reported yet ---------------------------------------------------------------


def test_what_the_speaker_has_not_reported_yet_is_missing_until_it_is():
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(5):  # heard from t = 100.00 to 100.05
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    ref.take(100.0, 320)
    ref.take(100.02, 320)  # read up to 100.04: the next frame needs up to 100.06
    assert ref.missing_s(320) == pytest.approx(0.01)
    ref.played(ramp(160, 800), RATE, 100.05)
    assert ref.missing_s(320) == 0.0
    assert samples(ref.take(100.04, 320))[-1] == 959  # handed out, not silence


def test_a_silent_speaker_is_not_waited_for():
    """Between answers the speaker plays silence, reported as late as any block: the child's words then reach the
    listener without a wait (silence is what the canceller gets either way)."""
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(5):
        ref.played(bytes(320), RATE, 100.0 + 0.01 * k)
    ref.take(100.0, 320)
    ref.take(100.02, 320)
    assert ref.missing_s(320) == 0.0


def test_a_speaker_that_stopped_reporting_is_not_waited_for():
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(5):
        ref.played(ramp(160, 160 * k), RATE, 100.0 + 0.01 * k)
    for i in range(15):  # the capture goes on 0.3 s; the speaker said nothing after 100.05
        ref.take(100.0 + 0.02 * i, 320)
    assert ref.missing_s(320) == 0.0
    assert EchoReference(RATE).missing_s(320) == 0.0  # nothing played at all


class _TimedFrames:
    """Mic frames at 10.00, 10.02, … s (a capture clock the test controls)."""

    sample_rate_hz = RATE
    frame_ms = 20

    def __init__(self, pcm: bytes) -> None:
        self._frames = [AudioFrame(pcm[i : i + 640], RATE, 10.0 + 0.02 * (i // 640)) for i in range(0, len(pcm), 640)]

    async def start(self) -> None:
        pass

    def __aiter__(self):
        return self

    async def __anext__(self) -> AudioFrame:
        if not self._frames:
            raise StopAsyncIteration
        return self._frames.pop(0)


@pytest.mark.parametrize("through", ["stage", "front_end_slot"])
async def test_a_frame_waits_for_the_render_the_speaker_reports_late(through):
    """The speaker's output buffer ran low: the block that sounded with the second frame is reported only after the
    mic delivered that frame. The stage waits for it; cleaned with silence instead, the echo would stay. `run`
    reads the stage through the front end's slot (audio/front_end.py): the wait holds there too."""
    played, _, _, _ = echo_scene(frames=2)
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(2):  # the first frame's render, reported in time
        ref.played(played[k * 160 : (k + 1) * 160].tobytes(), RATE, 10.0 + 0.01 * k)
    mic = _TimedFrames(played.tobytes())
    stage = EchoCancelledSource(mic, SubtractingCanceller(RATE), ref)
    source = stage
    if through == "front_end_slot":
        source = FrontEndSource(mic)
        source.install(stage)

    async def speaker_late() -> None:
        await asyncio.sleep(0.01)
        for k in (2, 3):
            ref.played(played[k * 160 : (k + 1) * 160].tobytes(), RATE, 10.0 + 0.01 * k)

    late = asyncio.create_task(speaker_late())
    frames = await collect(source, 2)
    await late
    assert all(not samples(f.pcm).any() for f in frames)  # both frames' echo removed
    assert stage.render_waits == 1 and 0 < stage.render_waited_s < stage.render_wait_s


async def test_a_render_that_never_comes_is_waited_for_a_bounded_time():
    played, _, _, _ = echo_scene(frames=2)
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(3):  # half of the second frame's render, and then the speaker says nothing more
        ref.played(played[k * 160 : (k + 1) * 160].tobytes(), RATE, 10.0 + 0.01 * k)
    stage = EchoCancelledSource(_TimedFrames(played.tobytes()), SubtractingCanceller(RATE), ref)
    frames = await collect(stage, 2)
    assert stage.render_waits == 1 and stage.render_waited_s >= stage.render_wait_s
    second = samples(frames[1].pcm)
    assert not second[:160].any() and second[160:].any()  # cleaned where the render came, echo where it did not
