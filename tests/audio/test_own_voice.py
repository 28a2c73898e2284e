"""The own-voice check: the toy's voice leaking past the canceller scores high, the child low, silence nothing;
and the two-step decision interrupts at once on a clear child and confirms the rest over a longer window."""

from __future__ import annotations

import numpy as np

from toy_runtime.audio.echo_reference import EchoReference
from toy_runtime.audio.echo_stage import EchoCancelledSource
from toy_runtime.audio.own_voice import OwnVoiceCheck
from toy_runtime.fakes.audio import ListSource
from toy_runtime.fakes.echo import SubtractingCanceller
from toy_runtime.ports.audio import AudioFrame

RATE = 16000
FRAMES = 60  # 20 ms each


def _stage(*, leak: float, child_from: int | None = None, toy_until: int = FRAMES) -> EchoCancelledSource:
    """The toy plays speech-like noise (silent from frame `toy_until`), which comes back into the mic at once;
    the canceller leaves `leak` of it; a child speaks from frame `child_from`. Every frame goes through."""
    rng = np.random.default_rng(5)
    played = (rng.normal(0, 3000, FRAMES * 320) * np.repeat(rng.uniform(0.2, 1.0, FRAMES * 4), 80)).astype(np.int16)
    played[toy_until * 320 :] = 0
    mic = played.astype(np.int32).copy()
    if child_from is not None:
        mic[child_from * 320 :] += rng.normal(0, 2500, (FRAMES - child_from) * 320).astype(np.int32)
    ref = EchoReference(RATE, lead_ms=0)
    for k in range(FRAMES * 2):
        ref.played(played[k * 160 : (k + 1) * 160].tobytes(), RATE, 10.0 + 0.01 * k)
    stage = EchoCancelledSource(ListSource(b""), SubtractingCanceller(RATE, gain=1.0 - leak), ref)
    pcm = np.clip(mic, -32768, 32767).astype(np.int16).tobytes()
    for i in range(FRAMES):
        stage.clean(AudioFrame(pcm[i * 640 : (i + 1) * 640], RATE, 10.0 + 0.02 * i))
    return stage


def test_a_leak_of_the_toys_voice_looks_like_it_over_any_window():
    stage = _stage(leak=0.1)  # -20 dB left: loud enough for the VAD, not for the residual gate
    assert stage.echo_likeness(0.16) > 0.9 and stage.echo_likeness(0.32) > 0.9


def test_the_child_over_a_perfectly_cancelled_toy_does_not():
    stage = _stage(leak=0.0, child_from=30)
    assert stage.echo_likeness(0.16) < 0.15 and stage.echo_likeness(0.32) < 0.15


def test_a_child_speaking_as_the_toy_falls_silent_scores_low_not_off_the_scale():
    # the render is silent over most lags: its correlation is rounding noise and must not count (it scored 560)
    stage = _stage(leak=0.0, child_from=50, toy_until=48)
    assert 0.0 <= stage.echo_likeness(0.16) < 0.15


class Scores:
    """A likeness that answers by window length, and counts the calls."""

    def __init__(self, by_window: dict[float, float]) -> None:
        self.by_window, self.calls = by_window, []

    def __call__(self, window_s: float) -> float:
        self.calls.append(window_s)
        return self.by_window[window_s]


async def test_a_clear_child_interrupts_at_once():
    scores = Scores({0.16: 0.05, 0.32: 0.9})
    verdict = await OwnVoiceCheck(scores, confirm_after_s=10.0).judge()  # no wait: it would hang the test
    assert not verdict.own_voice and scores.calls == [0.16]


async def test_an_ambiguous_start_is_judged_over_the_longer_window():
    own = await OwnVoiceCheck(Scores({0.16: 0.4, 0.32: 0.6}), confirm_after_s=0.01).judge()
    child = await OwnVoiceCheck(Scores({0.16: 0.4, 0.32: 0.2}), confirm_after_s=0.01).judge()
    assert (own.own_voice, own.window_s) == (True, 0.32)
    assert (child.own_voice, child.score) == (False, 0.2)


async def test_right_after_a_jump_in_the_render_every_start_is_confirmed_against_a_lower_line():
    scores = Scores({0.16: 0.05, 0.32: 0.2})
    calm = await OwnVoiceCheck(scores, confirm_after_s=0.01).judge()
    shaken = await OwnVoiceCheck(scores, lambda: True, confirm_after_s=0.01).judge()
    assert not calm.own_voice and calm.window_s == 0.16
    assert shaken.own_voice and shaken.window_s == 0.32  # a leak the canceller lets through while it re-learns


def test_the_stage_learns_until_it_has_heard_the_toy_long_enough():
    stage = _stage(leak=0.0)  # 1.2 s of the toy
    assert stage.learning()
    t = 10.0 + 0.02 * FRAMES
    rng = np.random.default_rng(7)

    def play(seconds: float, level: float) -> None:
        nonlocal t
        for _ in range(round(seconds / 0.02)):
            pcm = rng.normal(0, level, 320).astype(np.int16).tobytes() if level else bytes(640)
            stage.reference.played(pcm[:320], RATE, t)
            stage.reference.played(pcm[320:], RATE, t + 0.01)
            stage.clean(AudioFrame(pcm, RATE, t))
            t += 0.02

    play(3.0, 0)  # silence teaches it nothing, however long
    assert stage.learning() and not stage.recently_disturbed()
    play(stage.learn_s - 1.2 - 0.1, 3000)
    assert stage.learning()
    play(0.2, 3000)
    assert not stage.learning()


async def test_while_the_canceller_learns_nothing_interrupts():
    learning = [True]
    check = OwnVoiceCheck(Scores({0.16: 0.0, 0.32: 0.0}), learning=lambda: learning[0], confirm_after_s=0.01)
    verdict = await check.judge()  # the clearest child there is
    assert verdict.own_voice and verdict.learning
    learning[0] = False
    assert not (await check.judge()).own_voice


def test_the_stage_says_when_the_render_jumped_and_for_how_long():
    stage = _stage(leak=0.0)
    assert stage.recently_disturbed()  # the first render: the canceller has not learnt the echo path yet
    t0 = 10.0 + 0.02 * FRAMES
    for k in range(int(stage.disturbed_s / 0.02) + 1):
        stage.clean(AudioFrame(b"\x00\x00" * 320, RATE, t0 + 0.02 * k))
    assert not stage.recently_disturbed()
    ref = stage.reference
    # the speaker ran dry for 50 ms: its silence goes into the timeline (a jump the canceller must re-learn)
    ref.played(b"\x00\x10" * 160, RATE, 10.0 + 0.01 * FRAMES * 2 + 0.05, after_underflow=True)
    t = t0 + 0.02 * (int(stage.disturbed_s / 0.02) + 1)
    stage.clean(AudioFrame(b"\x00\x00" * 320, RATE, t))
    assert ref.underflow_gaps == 1 and stage.recently_disturbed()
    for k in range(1, int((stage.disturbed_s + 0.1) / 0.02) + 1):  # the capture goes on, frame after frame
        stage.clean(AudioFrame(b"\x00\x00" * 320, RATE, t + 0.02 * k))
    assert not stage.recently_disturbed()


def test_runs_check_reads_the_canceller_that_is_in_the_slot_when_it_asks():
    # `run` builds the voice loop before the canceller loads (after READY): a check bound to the canceller then
    # had none, and `run` stopped its own answers whenever the canceller leaked
    from toy_runtime.app.ears import build_ears, own_voice_check
    from toy_runtime.config import load_settings

    settings = load_settings(None, env={})
    assert settings.ears.echo_cancellation  # the default
    ears = build_ears(settings, ListSource(b""))
    check = own_voice_check(ears)
    assert check is not None and ears.echo is None
    assert check.learning() and check.likeness(0.32) == 0.0  # nothing learnt yet
    leaking = _stage(leak=0.1)
    ears.front_end.install(leaking)
    assert check.likeness(0.32) > 0.9 and check.disturbed() is leaking.recently_disturbed()
    assert check.learning() and leaking.learning()  # 1.2 s of the toy so far
    assert check.first() is None  # the leak is never taken for the child at once


def test_without_echo_cancellation_there_is_no_check():
    from toy_runtime.app.ears import build_ears, own_voice_check
    from toy_runtime.config import load_settings

    settings = load_settings(None, env={"TOY_EARS__ECHO_CANCELLATION": "false"})
    assert own_voice_check(build_ears(settings, ListSource(b""))) is None
