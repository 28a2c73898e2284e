"""The speakable guard's cost on the way to the first clause (not a test): µs per chunk and per first clause.

Usage: python scripts/bench_speakable.py [--repeat 2000] [--chunk 4]

Streams realistic replies (plain, markdown, a Hermes tool call, Chinese) in `--chunk`-character deltas, as a local
model does token by token, through (a) the SpeechSplitter alone, as before the guard, and (b) the SpeakableGuard
with the built-in registry's names and prompt texts (markup filter + splitter + segment check). It reports the CPU
time per chunk for both, and the extra CPU time the guard adds until the first segment is returned: that is the
guard's added latency to the first spoken clause. (The guard holds no plain text back, so it adds no waiting for
tokens on these replies; a reply that starts with a possible marker waits only until the next character decides.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toy_runtime.agent.chat_agent import speakable_rules  # noqa: E402
from toy_runtime.agent.sentences import SpeechSplitter  # noqa: E402
from toy_runtime.agent.speakable import SpeakableGuard  # noqa: E402
from toy_runtime.config import DEFAULT_PERSONA  # noqa: E402
from toy_runtime.fakes import memory_ports  # noqa: E402
from toy_runtime.plugins import default_registry  # noqa: E402

REPLIES = {
    "plain": "Ooh, good question! Dinosaurs lived a very long time ago, and some of them were as tall as a house. "
             "The biggest ones ate plants all day long.",
    "markdown": "## Dinosaur facts\n**Dinosaurs** were *huge*! 🦖\n- They laid eggs.\n- Some had feathers, "
                "like birds today.\nSee [the museum](https://museum.example/dinos) for more.",
    "tool call": 'Okay, turning it down a little for you! <tool_call>{"name": "adjust_device_volume", '
                 '"arguments": {"mode": "relative", "delta": -10}}</tool_call>',
    "chinese": "好的，我马上帮你把音量调低一点。恐龙生活在很久很久以前，有些恐龙和房子一样高。",
}


def chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def run(make, pieces: list[str]) -> tuple[float, float, int]:
    """(seconds until the first segment, seconds for the whole reply, chunks) for one fresh guard/splitter."""
    worker = make()
    first = None
    began = time.perf_counter()
    for piece in pieces:
        out = worker.feed(piece)
        if first is None and any(isinstance(item, str) for item in out):
            first = time.perf_counter() - began
    finish = worker.finish if hasattr(worker, "finish") else worker.flush
    finish()
    total = time.perf_counter() - began
    return (first if first is not None else total), total, len(pieces)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=4, help="characters per delta (about one token)")
    args = parser.parse_args()
    rules = speakable_rules(default_registry(memory_ports()), DEFAULT_PERSONA)
    makers = {"splitter only": lambda: SpeechSplitter(first_clause_min_chars=12),
              "guard": lambda: SpeakableGuard(rules, first_clause_min_chars=12)}
    print(f"{args.repeat} runs per reply, {args.chunk}-character deltas; medians")
    print(f"{'reply':<10} {'chunks':>6} {'splitter µs/chunk':>18} {'guard µs/chunk':>15} "
          f"{'guard added to first clause µs':>31}")
    for name, text in REPLIES.items():
        pieces = chunks(text, args.chunk)
        results = {}
        for label, make in makers.items():
            runs = [run(make, pieces) for _ in range(args.repeat)]
            results[label] = (statistics.median(r[0] for r in runs), statistics.median(r[1] / r[2] for r in runs))
        added = (results["guard"][0] - results["splitter only"][0]) * 1e6
        print(f"{name:<10} {len(pieces):>6} {results['splitter only'][1] * 1e6:>18.1f} "
              f"{results['guard'][1] * 1e6:>15.1f} {added:>31.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
