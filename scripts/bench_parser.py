"""Throughput of the text-event parser on a synthetic ChatAgent stream; prints MB/s and µs per chunk.

Usage: python scripts/bench_parser.py [--mb 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toy_runtime.agent.text_events import EventBlock, TextEventParser  # noqa: E402

REPLIES = [
    "Sure! I'll turn the volume down a little for you.",
    "3 < 5 and 7 > 2, so the <b>bigger</b> one wins.",
    "好的，我马上帮你把音量调低。",
    "Let me check the weather for tomorrow; one moment.",
]
BLOCKS = [
    "<agent_events>device.volume.adjust</agent_events>",
    "<agent_events>\n knowledge.web.search, calendar.schedule.create\n</agent_events>",
    "",
    "",
]


def synthetic_stream(size_chars: int, seed: int = 7) -> tuple[str, int]:
    """Replies with and without event blocks and stray '<', up to `size_chars`; returns (text, block count)."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = blocks = 0
    while total < size_chars:
        part = rng.choice(REPLIES) + " " + rng.choice(BLOCKS)
        blocks += "<agent_events>" in part
        parts.append(part)
        total += len(part)
    return "".join(parts), blocks


def run(text: str, chunk_chars: int) -> tuple[float, int, int]:
    """Parse `text` fed in `chunk_chars` deltas; returns (seconds, chunks, blocks seen)."""
    chunks = [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    parser = TextEventParser()
    seen = 0
    start = time.perf_counter()
    for chunk in chunks:
        for item in parser.feed(chunk):
            if type(item) is EventBlock:
                seen += 1
    parser.close()
    return time.perf_counter() - start, len(chunks), seen


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--mb", type=float, default=1.0, help="size of the synthetic stream in MB of UTF-8")
    args.add_argument("--repeat", type=int, default=3, help="runs per chunk size; the best is reported")
    opts = args.parse_args()
    text, blocks = synthetic_stream(int(opts.mb * 1_000_000))
    size_mb = len(text.encode()) / 1e6
    print(f"synthetic stream: {size_mb:.2f} MB UTF-8, {len(text)} chars, {blocks} event blocks")
    print(f"{'chunk chars':>11}  {'chunks':>9}  {'MB/s':>8}  {'µs/chunk':>9}")
    for chunk_chars in (1, 4, 16, 64, 256):
        best = min(run(text, chunk_chars) for _ in range(opts.repeat))
        seconds, chunks, seen = best
        assert seen == blocks, f"parser saw {seen} blocks, expected {blocks}"
        print(f"{chunk_chars:>11}  {chunks:>9}  {size_mb / seconds:>8.1f}  {seconds / chunks * 1e6:>9.2f}")


if __name__ == "__main__":
    main()
