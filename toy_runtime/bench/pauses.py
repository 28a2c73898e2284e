"""False cuts per hangover: utterances with a mid-sentence pause, run offline through the runtime's VAD and endpointer.

A child says "remind me to … [pause] … water the plants". If the pause is longer than what the endpointer
tolerates, the utterance is cut in two and the toy answers half a sentence. Each utterance here is two piper
phrases (the default voice, noise off: the same samples every run) joined by a pause of digital silence; the
pauses are spread evenly over 150–625 ms and are what a listener hears as silence: the first phrase is cut at its
audible end and the second starts at its audible onset (−50 dBFS, 10 ms windows, as the voice bench measures),
since piper pads each phrase with ~100–200 ms of near-silence. Every utterance is fed, 20 ms frame by frame,
through the real WebRTC VAD adapter and the runtime's `Endpointer` (end by level or by the VAD alone) at each
hangover; a *false cut* is an utterance that ends before its second part. No sound card is needed.

    python -m toy_runtime.bench.pauses            # prints the table (Markdown)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .utterances import audible_phrase

__all__ = ["PAIRS", "PAUSES_MS", "PauseResult", "false_cuts", "run_pause_bench"]

PAIRS: tuple[tuple[str, str], ...] = (
    ("remind me to", "water the plants"), ("can you tell me", "a story about a dragon"),
    ("what is the", "biggest animal in the world"), ("turn the music", "down a little"),
    ("I want to", "go to the park tomorrow"), ("set a reminder for", "eight o'clock"),
    ("how many legs", "does a spider have"), ("tell me a joke", "about a cat"),
    ("my favourite colour is", "blue"), ("what should I", "eat for breakfast"),
    ("can we play", "a guessing game"), ("why is the sky", "blue"),
    ("remind me to", "feed the fish at six"), ("I think that", "dinosaurs are cool"),
    ("what does a", "cow say"), ("please make it", "a bit louder"),
    ("how far is", "the sun from here"), ("can you sing", "happy birthday"),
    ("what time is", "my swimming lesson"), ("do you know", "where penguins live"),
)
PAUSES_MS: tuple[int, ...] = tuple(150 + 25 * i for i in range(len(PAIRS)))  # 150, 175, ..., 625
HANGOVERS_MS: tuple[int, ...] = (150, 200, 250, 300, 350, 400, 500)


@dataclass(frozen=True)
class PauseResult:
    """One utterance at one hangover: cut in its pause or not."""

    text: str
    pause_ms: int
    hangover_ms: int
    end_by_level: bool
    cut: bool


def false_cuts(first: np.ndarray, second: np.ndarray, pause_ms: int, hangover_ms: int, *, end_by_level: bool,
               vad_factory: Callable[[], Any], lead_ms: int = 300, frame_ms: int = 20) -> bool:
    """True when the utterance `first` + `pause_ms` of silence + `second` (16 kHz int16) is cut before `second`
    starts, by the runtime's endpointer at `hangover_ms` over the VAD from `vad_factory` (a fresh one: the runtime's
    VAD has heard speech before, so it first hears the whole utterance once, untimed)."""
    from .pause_corpus import judge_utterance

    cut, _ = judge_utterance([first, second], [pause_ms], hangover_ms, vad_factory=vad_factory, frame_ms=frame_ms,
                             lead_ms=lead_ms, end_by_level=end_by_level, room_dbfs=None)
    return cut


def run_pause_bench(cache_dir: Path, *, hangovers: Sequence[int] = HANGOVERS_MS, aggressiveness: int = 2,
                    pairs: Sequence[tuple[str, str]] = PAIRS, pauses: Sequence[int] = PAUSES_MS
                    ) -> list[PauseResult]:
    """Every (utterance, hangover, end rule): cut or not."""
    from ..adapters.webrtc_vad import WebRtcVad

    results = []
    for (a, b), pause in zip(pairs, pauses):
        first, second = audible_phrase(a, cache_dir), audible_phrase(b, cache_dir)
        for level in (True, False):
            for hangover in hangovers:
                cut = false_cuts(first, second, pause, hangover, end_by_level=level,
                                 vad_factory=lambda: WebRtcVad(aggressiveness))
                results.append(PauseResult(f"{a} … {b}", pause, hangover, level, cut))
    return results


def markdown(results: Sequence[PauseResult]) -> str:
    """False cuts and the shortest pause that was cut, per hangover and end rule."""
    hangovers = sorted({r.hangover_ms for r in results})
    out = ["| end of speech | " + " | ".join(f"hangover {h}" for h in hangovers) + " |",
           "|---|" + "---|" * len(hangovers)]
    for level in (True, False):
        cells = []
        for h in hangovers:
            rows = [r for r in results if r.hangover_ms == h and r.end_by_level is level]
            cuts = sum(r.cut for r in rows)
            cut_pauses = [r.pause_ms for r in rows if r.cut]
            cells.append(f"{cuts}/{len(rows)}" + (f" (from {min(cut_pauses)} ms)" if cut_pauses else ""))
        out.append(f"| {'by level' if level else 'VAD alone'} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from .utterances import utterance_cache_dir

    p.add_argument("--cache-dir", type=Path, default=utterance_cache_dir())
    args = p.parse_args(argv)
    print(markdown(run_pause_bench(args.cache_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
