"""Per-turn breakdown of the heard voice-to-voice time, and its p50/p90 summary.

Three clocks meet here: the probe recording's sample clock (what was heard), the runtime's monotonic clock (its
`voice.turn` waterfall, in ms after *its* end of speech) and the bench's monotonic clock (when the scripted LLM sent
the first token). The runtime's milestones are placed on the recording by one shared event per turn: the first token,
which the runtime logs (ASR final + client TTFT) and the bench timestamps when the scripted server sends it. With the
recording's first frame also on CLOCK_MONOTONIC (`ProbeRecording.first_frame_monotonic`), the heard total splits into

    end detection       heard end of speech → where the runtime's VAD + endpointer put it (with the end by level
                        a few ms; by the VAD alone ~120 ms: its overhang and piper's quiet tail; measured offline
                        on the played audio with the runtime's own VAD adapter and endpointer)
    capture, unseen     → the runtime's end of speech: what the runtime's capture-lag figure misses
    endpoint … playback queue   the runtime's own waterfall, including its capture lag (closing frame captured →
                        processed, from PortAudio's ADC times; 0 for a runtime that does not log it)
    output buffering    the runtime's first-audio time (PortAudio's DAC-time estimate; before, the moment the first
                        sample was handed to PortAudio) → the reply is heard

and the lines add up to the heard total by construction. Overhang + capture + output = "unseen by the runtime" =
heard − runtime-logged v2v, which needs no anchor at all; only its split does (good to a few ms: the probe's own
latency, and the runtime counts its first token from the request start, a little after the hand-off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..metrics.turns import Turn, percentile
from .heard import HeardTurn

__all__ = ["EARLY_END_TOLERANCE_MS", "LINES", "TurnBreakdown", "breakdown", "summarize_turns"]

# The runtime's end of speech by level may sit a frame before the heard end (its threshold is relative to the
# speech, the bench's a fixed −50 dBFS): only more than this counts as an early end (a cut, a missed word).
EARLY_END_TOLERANCE_MS = 40.0

# (key, label) of each breakdown line, in pipeline order.
LINES: tuple[tuple[str, str], ...] = (
    ("vad_overhang", "end detection (runtime's end of speech after the heard end)"),
    ("capture", "capture buffering, unseen"),
    ("endpoint", "endpoint (VAD hangover)"),
    ("capture_lag", "capture lag, seen (closing frame captured → processed)"),
    ("asr_final", "ASR final"),
    ("first_token", "LLM first token"),
    ("first_clause", "first clause"),
    ("tts_first_chunk", "TTS first chunk"),
    ("playback_queue", "playback queue"),
    ("output", "output buffering"),
)
# runtime waterfall milestone that ends each inside line, and the one it starts from
_INSIDE: dict[str, tuple[str | None, str]] = {
    "endpoint": (None, "endpoint"),
    "capture_lag": ("endpoint", "endpoint_decided"),
    "asr_final": ("endpoint_decided", "asr_final"),
    "first_token": ("asr_final", "first_token"),
    "first_clause": ("first_token", "first_text"),
    "tts_first_chunk": ("first_text", "first_clause_synthesized"),
    "playback_queue": ("first_clause_synthesized", "first_audio"),
}


@dataclass
class TurnBreakdown:
    """One turn: the heard total, the runtime's own figure, and the lines (ms; None = could not be measured)."""

    turn: int
    text: str
    heard_v2v_ms: float | None
    logged_v2v_ms: float | None
    added_ms: float | None  # heard − configured TTFT − hangover
    lines: dict[str, float | None] = field(default_factory=dict)
    problem: str | None = None  # the turn could not be measured
    early_end: bool = False  # the runtime's end of speech came before the user stopped

    @property
    def unseen_ms(self) -> float | None:
        """What the runtime's clock does not see: heard − runtime-logged v2v."""
        if self.heard_v2v_ms is None or self.logged_v2v_ms is None:
            return None
        return self.heard_v2v_ms - self.logged_v2v_ms

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "text": self.text, "heard_v2v_ms": _r(self.heard_v2v_ms),
                "logged_v2v_ms": _r(self.logged_v2v_ms), "unseen_ms": _r(self.unseen_ms), "added_ms": _r(self.added_ms),
                "lines_ms": {k: _r(v) for k, v in self.lines.items()}, "problem": self.problem,
                "early_end": self.early_end}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def breakdown(number: int, heard: HeardTurn, logged: Turn | None, *, recording_t0: float | None,
              first_token_sent: float | None, ttft_ms: float, hangover_ms: float,
              vad_tail_ms: float | None = None) -> TurnBreakdown:
    """Break one turn down. `recording_t0` / `first_token_sent` are CLOCK_MONOTONIC seconds (None: no split of
    the unseen part into capture and output). `vad_tail_ms`: how long after the level end the runtime's VAD still
    reports speech for this utterance (measured offline, `utterances.vad_tail_ms`); it is taken out of the capture
    side as its own line."""
    heard_ms = heard.v2v_ms
    out = TurnBreakdown(turn=number, text=logged.text if logged else "", heard_v2v_ms=heard_ms,
                        logged_v2v_ms=logged.voice_to_voice_ms if logged else None,
                        added_ms=None if heard_ms is None else heard_ms - ttft_ms - hangover_ms)
    if heard_ms is None:
        out.problem = "no user speech heard" if heard.speech_end_s is None else "no reply heard"
    if logged is None:
        out.problem = out.problem or "no voice.turn record"
        return out
    if out.unseen_ms is not None and out.unseen_ms < -EARLY_END_TOLERANCE_MS:
        # the runtime's own figure is longer than what was heard: its end of speech came before the user stopped
        # (the VAD missed the last quiet words, or a pause cut the utterance). The wait heard is real; the
        # runtime's figure and the split are not comparable for this turn.
        out.early_end = True
    m = dict(logged.milestones)
    if "endpoint_decided" not in m and "endpoint" in m:
        m["endpoint_decided"] = m["endpoint"]  # a runtime that does not log its capture lag: none seen
    for key, (start, end) in _INSIDE.items():
        a = 0.0 if start is None else m.get(start)
        b = m.get(end)
        out.lines[key] = None if a is None or b is None else b - a
    out.lines["vad_overhang"] = out.lines["capture"] = out.lines["output"] = None
    anchor = m.get("first_token")
    speech_end_s, reply_onset_s = heard.speech_end_s, heard.reply_onset_s
    if speech_end_s is None or reply_onset_s is None or recording_t0 is None or first_token_sent is None \
            or anchor is None or "first_audio" not in m:
        return out
    eos_runtime = first_token_sent - anchor / 1000.0  # the runtime's end of speech on CLOCK_MONOTONIC
    heard_end = recording_t0 + speech_end_s
    heard_reply = recording_t0 + reply_onset_s
    overhang = vad_tail_ms or 0.0
    out.lines["vad_overhang"] = overhang
    out.lines["capture"] = (eos_runtime - heard_end) * 1000.0 - overhang
    out.lines["output"] = (heard_reply - (eos_runtime + m["first_audio"] / 1000.0)) * 1000.0
    return out


def _dist(values: Sequence[float | None]) -> dict[str, float | int | None]:
    vals = [v for v in values if v is not None]
    p50, p90 = percentile(vals, 50), percentile(vals, 90)
    return {"n": len(vals), "p50": _r(p50), "p90": _r(p90)}


def summarize_turns(turns: Sequence[TurnBreakdown], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The report's numbers: p50/p90 of the heard v2v and added over every measured turn; of the runtime's own
    v2v, the unseen part and every line over the turns whose runtime end of speech did not come early; the per-turn
    rows; and `meta` (conditions, thresholds, machine notes)."""
    heard = [t for t in turns if t.problem is None]
    complete = [t for t in heard if not t.early_end]  # the runtime's figure and the split are comparable
    line_sum = [sum(v for v in t.lines.values() if v is not None) for t in complete
                if all(t.lines.get(k) is not None for k, _ in LINES)]
    return {
        "meta": dict(meta),
        "turns_attempted": len(turns),
        "turns_measured": len(heard),
        "early_ends": len(heard) - len(complete),
        "heard_v2v_ms": _dist([t.heard_v2v_ms for t in heard]),
        "added_ms": _dist([t.added_ms for t in heard]),
        "logged_v2v_ms": _dist([t.logged_v2v_ms for t in complete]),
        "unseen_ms": _dist([t.unseen_ms for t in complete]),
        "lines_ms": {key: _dist([t.lines.get(key) for t in complete]) for key, _ in LINES},
        "line_sum_ms": _dist(line_sum),
        "turns": [t.as_dict() for t in turns],
    }
