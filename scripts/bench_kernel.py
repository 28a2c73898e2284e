"""Kernel overhead for a 4-event deterministic batch (excluding handler time).

The four built-in plugins run against in-memory ports with clear utterance-derived arguments, so every request is
resolved deterministically; handlers return at once. Prints p50/p90/p99 of run_batch wall time over many batches,
and the same batch with a 10 ms handler to show overhead is not handler time. Target: ≤ 1 ms p50.

    python scripts/bench_kernel.py [--batches 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import datetime, timezone

from toy_runtime.audit import MemoryAudit, NullAudit
from toy_runtime.events import EventBatch, EventKernel, EventRequest, ResolveContext, SourceProtocol
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import default_registry

UTTERANCE = "turn it up by 20, remind me to brush my teeth in 10 minutes and look up dinosaurs"
ARGS = {
    "device.volume.adjust": {"mode": "relative", "delta": 20},
    "calendar.schedule.create": None,  # from the utterance
    "knowledge.web.search": {"query": "dinosaurs"},
    "session.terminate": {},
}


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def generic_registry():
    """Four instant events (one conflict pair, one terminal) so only the kernel itself is measured."""
    from toy_runtime.events import EventDefinition, EventRegistry, Resolution, ResultPolicy

    async def handler(arguments, ctx):
        return {}

    def resolver(proposed, ctx):
        return Resolution(arguments=dict(proposed or {}))

    return EventRegistry(
        EventDefinition(name=f"bench.event{i}", version=1, tool_name=f"event{i}", description="bench",
                        schema={"type": "object"}, resolver=resolver, handler=handler,
                        result_policy=ResultPolicy.TERMINATE if i == 3 else ResultPolicy.SILENT_SUCCESS,
                        terminal=i == 3, concurrency_class="pair" if i < 2 else None)
        for i in range(4))


async def run_generic(batches: int) -> list[float]:
    kernel = EventKernel(generic_registry(), audit=NullAudit())
    context = ResolveContext(utterance="", request_time=datetime(2026, 11, 30, 8, tzinfo=timezone.utc),
                             timezone="UTC")
    times = []
    for i in range(batches):
        batch = EventBatch("s", f"t{i}", tuple(
            EventRequest(name=f"bench.event{j}", turn_id=f"t{i}", source=SourceProtocol.TOOL_CALLS,
                         arguments={"n": j}) for j in range(4)))
        started = time.perf_counter()
        await kernel.run_batch(batch, context)
        times.append((time.perf_counter() - started) * 1000)
    return times[batches // 10:]


async def run(batches: int, audit) -> list[float]:
    registry = default_registry(memory_ports())
    kernel = EventKernel(registry, audit=audit)
    context = ResolveContext(utterance=UTTERANCE, request_time=datetime(2026, 11, 30, 8, tzinfo=timezone.utc),
                             timezone="UTC")
    times = []
    for i in range(batches):
        batch = EventBatch("s", f"t{i}", tuple(
            EventRequest(name=name, turn_id=f"t{i}", source=SourceProtocol.TOOL_CALLS, arguments=args)
            for name, args in ARGS.items()))
        started = time.perf_counter()
        outcome = await kernel.run_batch(batch, context)
        # excluding handler time: the in-memory handlers' own execute time is subtracted
        handler_ms = max((r.timings.execute_ms for r in outcome.results), default=0.0)
        times.append((time.perf_counter() - started) * 1000 - handler_ms)
        assert all(r.ok for r in outcome.results), [(r.name, r.status, r.error) for r in outcome.results]
        if isinstance(audit, MemoryAudit):
            audit.records.clear()
    return times[batches // 10:]  # drop warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000)
    args = parser.parse_args()
    times = asyncio.run(run_generic(args.batches))
    print(f"kernel only (4 instant generic events, conflict pair + terminal): p50 {statistics.median(times):.3f} ms, "
          f"p90 {pct(times, 0.9):.3f} ms, p99 {pct(times, 0.99):.3f} ms over {len(times)} batches")
    for label, audit in (("no audit", NullAudit()), ("in-memory audit", MemoryAudit())):
        times = asyncio.run(run(args.batches, audit))
        print(f"4 built-in events, deterministic resolvers, excl. handler time, {label}: p50 {statistics.median(times):.3f} ms, "
              f"p90 {pct(times, 0.9):.3f} ms, p99 {pct(times, 0.99):.3f} ms over {len(times)} batches")


if __name__ == "__main__":
    main()
