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


# -- end of speech by level ---------------------------------------------------------------------------------

LEVEL_CFG = EndpointerConfig(preroll_ms=40, start_ms=60, hangover_ms=100, min_utterance_ms=100,
                             max_utterance_ms=5000, no_speech_timeout_ms=None, level_credit_ms=200)


def run_levels(frames: list[tuple[bool, float]], cfg: EndpointerConfig = LEVEL_CFG,
               ep: Endpointer | None = None) -> list[tuple[int, object]]:
    """Feed (is_speech, level_db) frames of 20 ms; frames are their indices; only non-continue events."""
    ep = ep or Endpointer(cfg)
    out = []
    for i, (speech, level) in enumerate(frames):
        out += [(i, e) for e in ep.process(i, speech, 20, level) if not isinstance(e, SpeechContinues)]
    return out


QUIET = [(False, -90.0)] * 5
LOUD = [(True, -15.0)] * 8  # frames 5..12: speech at -15 dBFS


def test_the_hangover_counts_from_the_last_loud_speech_frame_not_the_vads_overhang():
    # the VAD goes on calling speech for 3 frames (60 ms) after the level dropped to -70 dBFS (55 dB under the peak)
    frames = QUIET + LOUD + [(True, -70.0)] * 3 + [(False, -96.0)] * 10
    ended = [e for _, e in run_levels(frames) if isinstance(e, SpeechEnded)]
    # the last loud frame ends at 13 × 20 = 260 ms: the utterance closes 100 ms later, inside the VAD's overhang
    assert ended == [SpeechEnded("hangover", speech_start_ms=100, speech_end_ms=260, at_ms=360)]
    # the same frames without levels end at the VAD's last speech frame (320 ms) + 100
    plain = Endpointer(LEVEL_CFG)
    events = [e for i, (s, _) in enumerate(frames) for e in plain.process(i, s, 20)]
    assert [e for e in events if isinstance(e, SpeechEnded)] == [
        SpeechEnded("hangover", speech_start_ms=100, speech_end_ms=320, at_ms=420)]


def test_level_end_off_ignores_the_levels():
    frames = QUIET + LOUD + [(True, -70.0)] * 3 + [(False, -96.0)] * 10
    cfg = EndpointerConfig(**{**LEVEL_CFG.__dict__, "level_end": False})
    ended = [e for _, e in run_levels(frames, cfg) if isinstance(e, SpeechEnded)]
    assert ended[0].speech_end_ms == 320


def test_the_threshold_follows_the_utterances_peak_and_the_noise_floor():
    # floor -50 dBFS (a noisy room): speech at -30 is loud (≥ -50 + 15), a tail at -40 is not, though only 10 dB
    # under the peak
    ep = Endpointer(LEVEL_CFG)
    frames = [(False, -50.0)] * 50 + [(True, -30.0)] * 8 + [(True, -40.0)] * 3 + [(False, -50.0)] * 10
    ended = [e for _, e in run_levels(frames, ep=ep) if isinstance(e, SpeechEnded)]
    assert ep.noise_floor_db == pytest.approx(-50.0)
    assert ended[0].speech_end_ms == 58 * 20
    # a loud speaker (peak -10) in a quiet room: -45 is still speech (within 40 dB of the peak), -55 is not
    frames = QUIET + [(True, -10.0)] * 8 + [(True, -45.0)] * 2 + [(True, -55.0)] * 2 + [(False, -96.0)] * 10
    ended = [e for _, e in run_levels(frames) if isinstance(e, SpeechEnded)]
    assert ended[0].speech_end_ms == 15 * 20


def test_the_noise_floor_rises_slowly_and_falls_at_once():
    ep = Endpointer(EndpointerConfig(floor_rise_db_per_s=3.0))
    assert ep.noise_floor_db is None
    ep.process(0, False, 20, -90.0)
    assert ep.noise_floor_db == -90.0  # the first non-speech frame sets it
    for i in range(50):  # one second at -40 dBFS
        ep.process(i, False, 20, -40.0)
    assert ep.noise_floor_db == pytest.approx(-87.0)
    ep.process(50, False, 20, -95.0)
    assert ep.noise_floor_db == -95.0
    ep.process(51, True, 20, -20.0)  # speech frames do not move it
    assert ep.noise_floor_db == -95.0


def test_a_speaker_too_quiet_for_the_level_rule_gets_the_vads_end():
    # floor -40, speech at -32 (only 8 dB above): never "loud", so the VAD alone ends it
    frames = [(False, -40.0)] * 50 + [(True, -32.0)] * 20 + [(False, -40.0)] * 10
    ended = [e for _, e in run_levels(frames) if isinstance(e, SpeechEnded)]
    assert ended == [SpeechEnded("hangover", speech_start_ms=1000, speech_end_ms=1400, at_ms=1500)]


def test_the_level_moves_the_end_back_by_at_most_the_credit():
    # loud once, then a long stretch the VAD calls speech at a quiet level: the end is the VAD's end − credit
    # (credit 200 capped at 3/4 of the 100 ms hangover = 75), so 25 ms of VAD silence are still needed
    frames = QUIET + LOUD + [(True, -70.0)] * 20 + [(False, -96.0)] * 10
    events = run_levels(frames)
    ended = [(i, e) for i, e in events if isinstance(e, SpeechEnded)]
    vad_end = (5 + 8 + 20) * 20
    assert ended == [(34, SpeechEnded("hangover", speech_start_ms=100, speech_end_ms=vad_end - 75, at_ms=700))]


def test_a_pause_inside_the_utterance_is_measured_from_the_last_loud_frame():
    # loud, then 4 frames of VAD speech at -70 (quiet) and 2 silent: cut (the end is the VAD's end − 75 ms credit,
    # 265 ms, 115 ms before the last silent frame ends); loud again after only 60 ms of quiet: not cut
    cut = QUIET + LOUD + [(True, -70.0)] * 4 + [(False, -96.0)] * 2 + LOUD + [(False, -96.0)] * 10
    ends = [e for _, e in run_levels(cut) if isinstance(e, SpeechEnded)]
    assert ends[0] == SpeechEnded("hangover", speech_start_ms=100, speech_end_ms=265, at_ms=380) and len(ends) == 2
    kept = QUIET + LOUD + [(True, -70.0)] * 3 + LOUD + [(False, -96.0)] * 10
    ends = [e for _, e in run_levels(kept) if isinstance(e, SpeechEnded)]
    assert len(ends) == 1 and ends[0].speech_end_ms == (5 + 8 + 3 + 8) * 20


def test_too_short_is_judged_on_the_vads_span_not_the_level_end():
    # 60 ms loud + 60 ms the VAD still calls speech (quiet): VAD span 120 ≥ min 100 → an utterance, not a click,
    # though its level end is 60 ms after the start
    frames = QUIET + [(True, -15.0)] * 3 + [(True, -70.0)] * 3 + [(False, -96.0)] * 10
    events = [e for _, e in run_levels(frames)]
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded]
    assert events[1].speech_end_ms == 160
    clicks = QUIET + [(True, -15.0)] * 4 + [(False, -96.0)] * 10  # 80 ms by any measure
    assert [type(e) for _, e in run_levels(clicks)] == [SpeechStarted, TooShort]
