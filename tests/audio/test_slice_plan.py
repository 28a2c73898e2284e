"""slice_plan: how a sentence's latent is cut into vocoder runs."""

from __future__ import annotations

from toy_runtime.adapters.piper_split import slice_plan


def sizes(plan):
    return [end - start for start, end in plan]


def test_a_short_first_slice_then_each_twice_the_one_before_up_to_the_window():
    plan = slice_plan(186, chunk_frames=44, context_frames=10, first_frames=12, min_frames=8)
    assert sizes(plan) == [12, 24, 44, 44, 44, 18]
    assert plan[0][0] == 0 and plan[-1][1] == 186 and all(a[1] == b[0] for a, b in zip(plan, plan[1:]))


def test_a_rest_too_small_to_voice_alone_joins_the_slice_before_it():
    assert sizes(slice_plan(43, chunk_frames=44, context_frames=10, first_frames=12, min_frames=8)) == [12, 31]


def test_a_sentence_that_fits_in_the_first_run_is_one_slice():
    assert slice_plan(22, chunk_frames=44, context_frames=10, first_frames=12, min_frames=8) == [(0, 22)]
    assert sizes(slice_plan(23, chunk_frames=44, context_frames=10, first_frames=12, min_frames=8)) == [12, 11]


def test_without_a_first_slice_the_slices_are_whole_windows_and_one_window_is_one_run():
    assert slice_plan(64, chunk_frames=44, context_frames=10) == [(0, 64)]
    assert sizes(slice_plan(65, chunk_frames=44, context_frames=10)) == [44, 21]
    assert slice_plan(500, chunk_frames=0, context_frames=10) == [(0, 500)]
