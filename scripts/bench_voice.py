"""Voice-to-voice latency of `toy-runtime run`, heard from outside, split by stage.

A thin wrapper around `toy-runtime bench voice` (toy_runtime/bench/voice_*.py): the real runtime process on the
headless PulseAudio card, utterances played into its mic, mic feed and speaker recorded on one clock, reply onset −
end of speech per turn, broken down against the runtime's own `voice.turn` waterfall.

    python scripts/bench_voice.py [--turns 12] [--ttft-ms 0] [--hangover-ms 200] [--out bench-out/voice]
"""

from __future__ import annotations

import sys

from toy_runtime.bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["voice", *sys.argv[1:]]))
