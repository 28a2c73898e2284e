"""The echo's delay behind its reference, measured and held where the canceller learnt it (audio/echo_delay.py)."""

from __future__ import annotations

import numpy as np

from toy_runtime.audio.echo_delay import EchoDelayMonitor
from toy_runtime.audio.echo_reference import EchoReference
from toy_runtime.audio.echo_stage import EchoCancelledSource
from toy_runtime.fakes.audio import ListSource
from toy_runtime.fakes.echo import SubtractingCanceller
from toy_runtime.ports.audio import AudioFrame

RATE = 16000
PIECE = 160


def speechy(seconds: float, seed: int = 1) -> np.ndarray:
    """Noise in syllable-like bursts (4 per second, never silent): what a talking toy's render looks like to the
    monitor, without the cost of a voice."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * np.arange(n) / RATE)
    return (rng.normal(0, 3000, n) * envelope).astype(np.int16)


def feed(monitor: EchoDelayMonitor, mic: np.ndarray, render: np.ndarray) -> list[tuple[float, int]]:
    """Every 10 ms piece; the shifts returned, with when (seconds). Each shift is undone as the stage does, by
    handing out the render that much later from then on."""
    shifts: list[tuple[float, int]] = []
    moved = 0
    for k in range(len(mic) // PIECE):
        at = k * PIECE - moved
        piece = np.zeros(PIECE, np.int16)
        chunk = render[max(at, 0) : at + PIECE] if at + PIECE > 0 else piece[:0]
        piece[PIECE - len(chunk) if at < 0 else 0 :][: len(chunk)] = chunk
        shift = monitor.add(mic[k * PIECE : (k + 1) * PIECE].tobytes(), piece.tobytes())
        if shift:
            shifts.append((k * 0.01, shift))
            moved += shift
    return shifts


def delayed(x: np.ndarray, samples: int, gain: float = 0.5) -> np.ndarray:
    return (np.concatenate([np.zeros(samples), x[: len(x) - samples]]) * gain).astype(np.int16)


def test_the_first_confident_delay_is_kept_and_a_steady_echo_moves_nothing():
    render = speechy(4.0)
    monitor = EchoDelayMonitor(RATE)
    assert feed(monitor, delayed(render, 1120), render) == []
    assert monitor.delay_samples == 1120 and monitor.last_score > 0.99 and monitor.checks >= 10


def test_an_echo_that_steps_later_or_earlier_is_found_within_half_a_second():
    render = speechy(6.0)
    for step in (7, -15, -166):
        mic = delayed(render, 1120)
        mic[3 * RATE :] = delayed(render, 1120 + step)[3 * RATE :]
        monitor = EchoDelayMonitor(RATE)
        shifts = feed(monitor, mic, render)
        assert len(shifts) == 1, shifts
        at, shift = shifts[0]
        assert shift == step and 3.0 < at <= 3.5


def test_the_child_alone_or_nothing_played_gives_no_estimate():
    render = speechy(3.0)
    child = speechy(3.0, seed=9)  # a voice that is not the render
    monitor = EchoDelayMonitor(RATE)
    assert feed(monitor, child, render) == [] and monitor.delay_samples is None
    assert monitor.checks > 0 and monitor.last_score < 0.2
    quiet = EchoDelayMonitor(RATE)
    assert feed(quiet, delayed(render, 800), np.zeros_like(render)) == [] and quiet.checks == 0


def test_a_render_that_starts_inside_the_window_is_not_measured():
    # the toy starting to speak: the slice at the true lag is still silent, a louder neighbour would win
    render = speechy(2.0)
    render[: RATE // 2] = 0
    monitor = EchoDelayMonitor(RATE)
    for k in range(int(0.9 * RATE) // PIECE):  # up to 0.4 s into the speech: every window still reaches silence
        monitor.add(delayed(render, 1120)[k * PIECE : (k + 1) * PIECE].tobytes(),
                    render[k * PIECE : (k + 1) * PIECE].tobytes())
    assert monitor.delay_samples is None


def test_the_reference_is_nudged_back_and_the_canceller_cancels_again():
    """The stage with a canceller that only cancels an exactly aligned echo: after the echo moves by 7 samples
    (a speaker underrun's silence placed a little off), the monitor moves the reference and the echo is gone."""
    for hold in (True, False):
        render = speechy(4.0)
        mic = render.copy()
        mic[2 * RATE :] = delayed(render, 7, gain=1.0)[2 * RATE :]
        ref = EchoReference(RATE, lead_ms=0)
        stage = EchoCancelledSource(ListSource(b""), SubtractingCanceller(RATE), ref, hold_delay=hold)
        out = []
        for i in range(len(mic) // 320):  # the speaker plays each frame just before the mic hears it
            for k in (2 * i, 2 * i + 1):
                ref.played(render[k * PIECE : (k + 1) * PIECE].tobytes(), RATE, 10.0 + 0.01 * k)
            frame = AudioFrame(mic[i * 320 : (i + 1) * 320].tobytes(), RATE, 10.0 + 0.02 * i)
            out.append(np.frombuffer(stage.clean(frame).pcm, np.int16))
        last = np.concatenate(out[-50:])  # the last second
        if hold:
            assert ref.nudges == 1 and not last.any()
            assert stage.delay_monitor is not None and stage.delay_monitor.delay_samples == 0
        else:
            assert ref.nudges == 0 and np.abs(last).mean() > 500  # the toy's voice, uncancelled


def test_steps_never_walk_the_reference_further_than_near_ms_a_path_that_moved_further_is_kept():
    render = speechy(8.0)
    mic = delayed(render, 1120)
    mic[3 * RATE :] = delayed(render, 1120 + 400)[3 * RATE :]  # 25 ms: undone
    monitor = EchoDelayMonitor(RATE, near_ms=30.0)
    assert [shift for _, shift in feed(monitor, mic, render)] == [400]
    far = delayed(render, 1120)
    far[3 * RATE :] = delayed(render, 1120 + 300)[3 * RATE :]
    far[5 * RATE :] = delayed(render, 1120 + 300 + 300)[5 * RATE :]  # 37.5 ms from the first relation in all
    monitor = EchoDelayMonitor(RATE, near_ms=30.0)
    assert [shift for _, shift in feed(monitor, far, render)] == [300]  # the second step is a new path
    assert monitor.delay_samples == 1120 + 300  # measured after the first was undone: the new relation
