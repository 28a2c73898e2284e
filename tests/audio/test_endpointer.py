"""The endpointer on synthetic frame sequences: exact positions, exact frames, no clock."""

from __future__ import annotations

import pytest

from toy_runtime.audio.endpointer import (
    Endpointer,
    EndpointerConfig,
    NoSpeechTimeout,
    SpeechContinues,
    SpeechEnded,
    SpeechStarted,
    TooShort,
)

CFG = EndpointerConfig(
    preroll_ms=40, start_ms=60, hangover_ms=100, min_utterance_ms=100, max_utterance_ms=1000, no_speech_timeout_ms=None
)


def run(pattern: str, cfg: EndpointerConfig = CFG, frame_ms: float = 20, ep: Endpointer | None = None,
        first: int = 0) -> list[tuple[int, object]]:
    """Feed one frame per character ("S" speech, "." silence; spaces ignored); frames are their indices."""
    ep = ep or Endpointer(cfg)
    out = []
    i = first
    for ch in pattern.replace(" ", ""):
        for ev in ep.process(i, ch == "S", frame_ms):
            out.append((i, ev))
        i += 1
    return out


def without_continues(events):
    return [(i, e) for i, e in events if not isinstance(e, SpeechContinues)]


def test_speech_opens_after_start_ms_with_preroll():
    events = run("....SSS")
    assert events == [(6, SpeechStarted(preroll=(2, 3), speech=(4, 5, 6), speech_start_ms=80, at_ms=140))]
    assert events[0][1].frames == (2, 3, 4, 5, 6)


def test_a_silent_frame_resets_the_start_run_and_old_speech_becomes_preroll():
    events = run("SS.SS.SSS")
    assert events == [(8, SpeechStarted(preroll=(4, 5), speech=(6, 7, 8), speech_start_ms=120, at_ms=180))]


def test_preroll_empty_at_the_very_start():
    assert run("SSS") == [(2, SpeechStarted(preroll=(), speech=(0, 1, 2), speech_start_ms=0, at_ms=60))]


def test_hangover_ends_the_utterance_and_every_open_frame_is_passed_on():
    events = run("SSSSSSSS .....")
    opened = [e for _, e in events if isinstance(e, SpeechContinues)]
    assert [e.frame for e in opened] == list(range(3, 13))
    assert [e.is_speech for e in opened] == [True] * 5 + [False] * 5
    assert without_continues(events) == [
        (2, SpeechStarted(preroll=(), speech=(0, 1, 2), speech_start_ms=0, at_ms=60)),
        (12, SpeechEnded("hangover", speech_start_ms=0, speech_end_ms=160, at_ms=260)),
    ]
    assert events[-1][1].speech_ms == 160


def test_a_pause_shorter_than_the_hangover_does_not_end_it():
    events = without_continues(run("SSSSSS .... SS ....."))
    assert events[-1] == (16, SpeechEnded("hangover", speech_start_ms=0, speech_end_ms=240, at_ms=340))
    assert len(events) == 2


def test_too_short_speech_is_discarded():
    events = without_continues(run("SSS ....."))
    assert events[-1] == (7, TooShort(speech_start_ms=0, speech_end_ms=60, at_ms=160))
    assert events[-1][1].speech_ms == 60


def test_exactly_min_utterance_is_kept():
    events = without_continues(run("SSSSS ....."))  # 100 ms of speech, min is 100 ms
    assert events[-1] == (9, SpeechEnded("hangover", speech_start_ms=0, speech_end_ms=100, at_ms=200))


def test_max_length_forces_an_end_then_speech_must_reopen():
    events = without_continues(run("S" * 53))
    assert events == [
        (2, SpeechStarted(preroll=(), speech=(0, 1, 2), speech_start_ms=0, at_ms=60)),
        (49, SpeechEnded("max_length", speech_start_ms=0, speech_end_ms=1000, at_ms=1000)),
        (52, SpeechStarted(preroll=(), speech=(50, 51, 52), speech_start_ms=1000, at_ms=1060)),
    ]


def test_max_length_counts_from_the_first_speech_frame_not_the_preroll():
    events = without_continues(run("." * 10 + "S" * 60))
    assert events[1] == (59, SpeechEnded("max_length", speech_start_ms=200, speech_end_ms=1200, at_ms=1200))


def test_no_speech_timeout_fires_once_and_rearms_after_reset_and_after_an_utterance():
    cfg = EndpointerConfig(preroll_ms=40, start_ms=60, hangover_ms=100, min_utterance_ms=100,
                           max_utterance_ms=1000, no_speech_timeout_ms=200)
    ep = Endpointer(cfg)
    events = run("." * 30, ep=ep)
    assert events == [(9, NoSpeechTimeout(waited_ms=200, at_ms=200))]
    ep.reset()
    assert ep.position_ms == 0
    assert run("." * 10, ep=ep) == [(9, NoSpeechTimeout(waited_ms=200, at_ms=200))]
    ep.reset()
    events = without_continues(run("SSSSSS ..... " + "." * 10, ep=ep))
    assert [type(e) for _, e in events] == [SpeechStarted, SpeechEnded, NoSpeechTimeout]
    assert events[-1] == (20, NoSpeechTimeout(waited_ms=200, at_ms=420))


def test_speech_run_counts_toward_the_timeout_until_it_opens():
    cfg = EndpointerConfig(start_ms=60, no_speech_timeout_ms=100)
    events = run("..SS.", cfg)  # 100 ms pass without speech opening
    assert events == [(4, NoSpeechTimeout(waited_ms=100, at_ms=100))]


def test_thirty_ms_frames():
    events = without_continues(run("..SS" + "." * 7, frame_ms=30))  # start_ms 60 = two 30 ms frames
    assert events[0] == (3, SpeechStarted(preroll=(1,), speech=(2, 3), speech_start_ms=60, at_ms=120))
    # 60 ms of speech < 100 ms min: discarded after 4 silent frames (120 ms ≥ 100 ms hangover)
    assert events[1] == (7, TooShort(speech_start_ms=60, speech_end_ms=120, at_ms=240))


def test_preroll_keeps_at_most_preroll_ms_when_frames_do_not_divide_it():
    cfg = EndpointerConfig(preroll_ms=50, start_ms=60)
    events = run("......SSS", cfg)
    assert events[0][1].preroll == (4, 5)  # 40 ms: a third frame would exceed 50 ms


def test_reset_discards_an_open_utterance_and_the_preroll():
    ep = Endpointer(CFG)
    run("..SSSS", ep=ep)
    assert ep.in_speech
    ep.reset()
    assert not ep.in_speech
    events = run("SSS", ep=ep, first=100)
    assert events == [(102, SpeechStarted(preroll=(), speech=(100, 101, 102), speech_start_ms=0, at_ms=60))]


@pytest.mark.parametrize(
    "kwargs",
    [dict(start_ms=0), dict(hangover_ms=0), dict(preroll_ms=-1), dict(max_utterance_ms=50, min_utterance_ms=100),
     dict(no_speech_timeout_ms=0)],
)
def test_config_rejects_nonsense(kwargs):
    with pytest.raises(ValueError):
        EndpointerConfig(**kwargs)


def test_frame_ms_must_be_positive():
    with pytest.raises(ValueError):
        Endpointer().process(0, True, 0)
