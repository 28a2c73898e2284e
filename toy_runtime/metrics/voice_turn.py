"""The `voice.turn` audit record: one spoken turn's milestones, and the fields `report` and the demo read from it.

The voice loop fills a `VoiceTurnRecord` as the turn runs (monotonic seconds) and writes `as_audit()` under
`AuditKind.VOICE_TURN`; `metrics/turns.py` reads those fields back into a `Turn`. Pure data: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["VoiceTurnRecord"]


@dataclass
class VoiceTurnRecord:
    """Milestones of one spoken turn, for the latency waterfall (monotonic seconds)."""

    turn: int
    text: str
    end_of_speech_at: float
    endpoint_at: float
    asr_final_at: float
    handoff_at: float
    first_text_at: float | None = None
    first_clause_started_at: float | None = None
    first_clause_synthesized_at: float | None = None
    first_audio_at: float | None = None
    second_first_audio_at: float | None = None
    holding_audio_at: float | None = None  # the holding cue, when the first answer was late
    decided_at: float | None = None  # the listener processed the closing frame (endpoint_at + capture lag)
    events: list[dict[str, Any]] = field(default_factory=list)
    turn_metrics: dict[str, Any] = field(default_factory=dict)
    spoken: list[str] = field(default_factory=list)
    terminated: bool = False
    interrupted: bool = False
    barge_in_stop_ms: float | None = None  # from the child's first word over the toy to its playback stopped
    heard: list[str] | None = None  # an interrupted turn: what the child heard before the stop
    went_on: bool = False  # interrupted because the child went on with her sentence (session/going_on.py)
    joins: str | None = None  # this turn's words began in the turn before, stopped when she went on: those words
    turn_id: str | None = None
    turn_end: str = "fixed"  # what ended the child's turn: the predicted class (complete/unfinished/unsure) or fixed

    def waterfall_ms(self) -> dict[str, float | None]:
        """Each milestone in ms after the end of speech."""
        rel = lambda t: None if t is None else round((t - self.end_of_speech_at) * 1000, 1)  # noqa: E731
        ttft = (self.turn_metrics.get("first_answer") or {}).get("ttft_ms")
        return {
            "endpoint": rel(self.endpoint_at),
            "endpoint_decided": rel(self.decided_at),
            "asr_final": rel(self.asr_final_at),
            "first_token": None if ttft is None else round(rel(self.handoff_at) + ttft, 1),
            "first_text": rel(self.first_text_at),
            "first_clause_synthesized": rel(self.first_clause_synthesized_at),
            "first_audio": rel(self.first_audio_at),
            "second_answer_audio": rel(self.second_first_audio_at),
            "holding_cue_audio": rel(self.holding_audio_at),
            **{f"event:{e['name']}": rel(e["at"]) for e in self.events},
        }

    def as_audit(self) -> dict[str, Any]:
        waterfall = self.waterfall_ms()
        ttft = (self.turn_metrics.get("first_answer") or {}).get("ttft_ms")
        first_audio = waterfall["first_audio"]
        tts_ms = None
        if self.first_clause_started_at is not None and self.first_clause_synthesized_at is not None:
            tts_ms = round((self.first_clause_synthesized_at - self.first_clause_started_at) * 1000, 1)
        runtime_added = None
        if first_audio is not None:
            # what the runtime itself adds: everything but the hangover, the provider's TTFT and the TTS model
            hangover = waterfall["endpoint"] or 0.0
            runtime_added = round(first_audio - hangover - (ttft or 0.0) - (tts_ms or 0.0), 1)
        return {
            "turn": self.turn,
            "turn_id": self.turn_id,
            "text": self.text,
            "waterfall_ms": waterfall,
            "turn_end": self.turn_end,
            "voice_to_voice_ms": first_audio,
            "first_clause_tts_ms": tts_ms,
            "provider_ttft_ms": ttft,
            "runtime_added_ms": runtime_added,
            "events": [{k: v for k, v in e.items() if k != "at"} for e in self.events],
            "spoken": self.spoken,
            "terminated": self.terminated,
            "interrupted": self.interrupted,
            **({"barge_in_stop_ms": self.barge_in_stop_ms, "heard": self.heard, "went_on": self.went_on}
               if self.interrupted else {}),
            **({"joins": self.joins} if self.joins is not None else {}),
        }
