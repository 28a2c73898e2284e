"""One knob, one default: the endpointer's and the turn-end policy's bare defaults are `[vad]`'s own."""

from __future__ import annotations

from toy_runtime.audio.endpointer import EndpointerConfig
from toy_runtime.audio.turn_end import TurnEndPolicy
from toy_runtime.bench.voice_run import VoiceBenchConfig
from toy_runtime.config import VadConfig


def test_the_endpointer_and_turn_end_defaults_are_the_vad_sections():
    vad = VadConfig()
    bare = EndpointerConfig()
    for name in ("preroll_ms", "start_ms", "hangover_ms", "min_utterance_ms", "max_utterance_ms"):
        assert getattr(bare, name) == getattr(vad, name), name
    policy = TurnEndPolicy()
    for name in ("complete_ms", "hangover_ms", "unfinished_ms"):
        assert getattr(policy, name) == getattr(vad, name), name
    assert VoiceBenchConfig().hangover_ms == vad.hangover_ms  # the voice bench runs the runtime as shipped
