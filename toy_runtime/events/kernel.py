"""The generic event kernel: resolve → validate → confirm → dedupe → schedule → execute → aggregate.

It runs on definition metadata only; it never names or compares a concrete event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from .audit import AuditSink, NullAudit
from .continuation import Continuation, aggregate
from .definition import EventDefinition, EventFailure, ExecutionContext, ResolveContext
from .fallback import ArgumentFallback
from .idempotency import IdempotencyStore, canonical_json, idempotency_key
from .model import EventBatch, EventRequest, EventResult, EventStatus, EventTimings
from .registry import EventRegistry
from .resolution import ResolvedArguments, resolve_request


@dataclass(frozen=True)
class BatchOutcome:
    """Results in input order plus the continuation decision."""

    results: tuple[EventResult, ...]
    continuation: Continuation
    dropped: tuple[str, ...] = ()  # unknown names that were never executed
    elapsed_ms: float = 0.0


@dataclass
class _Slot:
    """Book-keeping for one request while its batch runs."""

    index: int
    request: EventRequest
    definition: EventDefinition
    resolved: asyncio.Future  # ResolvedArguments | None, set once resolution ends
    done: asyncio.Future  # EventResult, set once the event has a final result
    started: float = 0.0


ResultCallback = Callable[[EventResult], None]


class EventKernel:
    """Runs event batches with bounded concurrency, conflict classes, terminal barriers and deadlines."""

    def __init__(
        self,
        registry: EventRegistry,
        *,
        audit: AuditSink | None = None,
        fallback: ArgumentFallback | None = None,
        idempotency: IdempotencyStore | None = None,
        max_concurrency: int = 4,
        batch_deadline_s: float = 10.0,
        terminal_barrier_s: float = 4.0,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be ≥ 1")
        self.registry = registry
        self.audit = audit or NullAudit()
        self.fallback = fallback
        self.idempotency = idempotency or IdempotencyStore()
        self.max_concurrency = max_concurrency
        self.batch_deadline_s = batch_deadline_s
        self.terminal_barrier_s = terminal_barrier_s
        self._definitions = {d.name: d for d in registry}

    async def run_batch(
        self,
        batch: EventBatch,
        context: ResolveContext,
        *,
        session_id: str | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        """Run one batch to completion (or its deadline); never raises for an event's failure."""
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        session = session_id or batch.session_id
        slots: list[_Slot] = []
        dropped: list[str] = []
        for request in batch.requests:
            definition = self.registry.lookup(request.name)
            if definition is None:
                dropped.append(request.name)
                self.audit.record("event.dropped", event_id=request.event_id, name=request.name,
                                  turn_id=batch.turn_id, reason="unknown_event")
                continue
            if definition.name != request.name:  # a provider tool name: map back to the namespaced name
                request = replace(request, name=definition.name)
            self.audit.record("event.detected", event_id=request.event_id, name=request.name, turn_id=batch.turn_id,
                              source=request.source.value, proposed=dict(request.arguments or {}),
                              arguments_error=request.arguments_error)
            slots.append(_Slot(len(slots), request, definition, loop.create_future(), loop.create_future()))

        semaphore = asyncio.Semaphore(self.max_concurrency)
        tasks = [
            asyncio.create_task(self._run_slot(slot, slots, context, session, semaphore, t0, on_result),
                                name=f"event:{slot.request.name}:{slot.request.event_id}")
            for slot in slots
        ]
        try:
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=self.batch_deadline_s)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=1.0)
        finally:
            for task in tasks:  # never leave a task running past the batch, even if we were cancelled
                if not task.done():
                    task.cancel()

        results: list[EventResult] = []
        for slot in slots:
            if slot.done.done() and not slot.done.cancelled():
                results.append(slot.done.result())
                continue
            result = self._result(slot, EventStatus.TIMED_OUT, self._resolved_or_none(slot), t0,
                                  error=f"batch deadline of {self.batch_deadline_s:g}s passed",
                                  error_code="batch_deadline")
            self._audit_result(result, batch.turn_id)
            if on_result:
                on_result(result)
            results.append(result)

        continuation = aggregate(results, self._definitions)
        elapsed = (time.perf_counter() - t0) * 1000
        self.audit.record("batch.completed", turn_id=batch.turn_id, events=[r.name for r in results],
                          statuses=[r.status.value for r in results], dropped=dropped,
                          continuation=continuation.as_dict(), ms=round(elapsed, 3))
        return BatchOutcome(tuple(results), continuation, tuple(dropped), elapsed)

    # -- one request --------------------------------------------------------------------------------

    async def _run_slot(self, slot, slots, context, session, semaphore, t0, on_result) -> None:
        slot.started = time.perf_counter()
        try:
            result = await self._process(slot, slots, context, session, semaphore, t0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a kernel bug for one event must not take its siblings down
            result = self._result(slot, EventStatus.FAILED, self._resolved_or_none(slot), t0,
                                  error=f"internal error: {exc}", error_code="internal_error")
        finally:
            if not slot.resolved.done():
                slot.resolved.set_result(None)
        self._audit_result(result, slot.request.turn_id)
        slot.done.set_result(result)
        if on_result:
            on_result(result)

    async def _process(self, slot: _Slot, slots, context, session, semaphore, t0) -> EventResult:
        definition, request = slot.definition, slot.request
        resolved = await resolve_request(self.registry, definition, request, context, self.fallback, self.audit)
        slot.resolved.set_result(resolved)
        if resolved.outcome == "invalid":
            return self._result(slot, EventStatus.REJECTED, resolved, t0, error=resolved.error,
                                error_code=resolved.error_code, question=resolved.question)
        if resolved.outcome == "incomplete":
            return self._result(slot, EventStatus.NEEDS_CLARIFICATION, resolved, t0, question=resolved.question,
                                error=f"missing or ambiguous: {', '.join(resolved.missing)}",
                                error_code="needs_clarification")
        if definition.requires_confirmation:
            question = (definition.confirmation_question(resolved.arguments, {})
                        if definition.confirmation_question else f"Should I really do {definition.name}?")
            return self._result(slot, EventStatus.NEEDS_CONFIRMATION, resolved, t0, question=question,
                                error_code="needs_confirmation")

        duplicate_of = await self._earlier_duplicate(slot, slots, resolved)
        if duplicate_of is not None:
            return self._result(slot, EventStatus.SKIPPED_DUPLICATE, resolved, t0,
                                result={"duplicate_of": duplicate_of})

        key = idempotency_key(session, request.turn_id, request.event_id, definition.name, resolved.arguments)
        earlier = self.idempotency.get(key)
        if earlier is None and (flight := self.idempotency.inflight(key)) is not None:
            earlier = await asyncio.shield(flight)
        if earlier is not None:
            self.audit.record("event.idempotent_replay", event_id=request.event_id, name=definition.name, key=key)
            return replace(earlier, replayed=True)

        flight = self.idempotency.begin(key)
        result: EventResult | None = None
        try:
            await self._wait_for_turn(slot, slots, t0)
            queued_at = time.perf_counter()
            async with semaphore:
                exec_started = time.perf_counter()
                status, payload, error, code = await self._execute(slot, resolved.arguments, session, key)
                exec_ms = (time.perf_counter() - exec_started) * 1000
            result = self._result(slot, status, resolved, t0, result=payload, error=error, error_code=code,
                                  key=key, queued_ms=(exec_started - queued_at) * 1000, execute_ms=exec_ms)
            return result
        finally:
            if result is None:  # cancelled (deadline) — waiters get a timed-out view, nothing is remembered
                result = self._result(slot, EventStatus.TIMED_OUT, resolved, t0, key=key, error_code="cancelled")
            self.idempotency.finish(key, result, remember=result.status is not EventStatus.TIMED_OUT)

    async def _earlier_duplicate(self, slot: _Slot, slots: list[_Slot], resolved: ResolvedArguments) -> str | None:
        """Event id of an earlier same-name request with equivalent normalized arguments, if any."""
        mine = canonical_json(resolved.arguments)
        for other in slots[: slot.index]:
            if other.definition is not slot.definition:
                continue
            theirs = await asyncio.shield(other.resolved)
            if theirs is not None and theirs.outcome == "resolved" and canonical_json(theirs.arguments) == mine:
                return other.request.event_id
        return None

    async def _wait_for_turn(self, slot: _Slot, slots: list[_Slot], t0: float) -> None:
        """Conflicting earlier events finish first; a terminal event waits for every sibling (bounded)."""
        keys = slot.definition.lock_keys
        blockers = [o.done for o in slots[: slot.index] if keys and (o.definition.lock_keys & keys)]
        if blockers:
            await asyncio.wait(blockers)
        if slot.definition.terminal:
            siblings = [o.done for o in slots if o is not slot and not o.definition.terminal]
            remaining = self.terminal_barrier_s - (time.perf_counter() - t0)
            if siblings and remaining > 0:
                await asyncio.wait(siblings, timeout=remaining)

    async def _execute(self, slot: _Slot, arguments: Mapping[str, Any], session: str, key: str):
        definition, request = slot.definition, slot.request
        ctx = ExecutionContext(session_id=session, turn_id=request.turn_id, event_id=request.event_id,
                               idempotency_key=key)
        attempts = 1 + (definition.retries if definition.read_only else 0)
        status, payload, error, code = EventStatus.FAILED, {}, None, None
        for attempt in range(attempts):
            try:
                async with asyncio.timeout(definition.timeout_s):
                    payload = dict(await definition.handler(dict(arguments), ctx))
                return EventStatus.SUCCEEDED, payload, None, None
            except TimeoutError:
                status, error, code = EventStatus.TIMED_OUT, f"timed out after {definition.timeout_s:g}s", "timeout"
            except EventFailure as exc:
                status, payload, error, code = EventStatus.FAILED, exc.details, exc.message, exc.code
                if not exc.details.get("transient"):
                    break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                status, error, code = EventStatus.FAILED, f"{type(exc).__name__}: {exc}", "handler_error"
            self.audit.record("event.attempt_failed", event_id=request.event_id, name=definition.name,
                              attempt=attempt + 1, of=attempts, error=error)
        return status, payload, error, code

    # -- helpers ------------------------------------------------------------------------------------

    @staticmethod
    def _resolved_or_none(slot: _Slot) -> ResolvedArguments | None:
        if slot.resolved.done() and not slot.resolved.cancelled():
            return slot.resolved.result()
        return None

    def _result(self, slot: _Slot, status: EventStatus, resolved: ResolvedArguments | None, t0: float, *,
                result: Mapping[str, Any] | None = None, error: str | None = None, error_code: str | None = None,
                question: str | None = None, key: str | None = None, queued_ms: float = 0.0,
                execute_ms: float = 0.0) -> EventResult:
        now = time.perf_counter()
        timings = EventTimings(
            resolve_ms=resolved.resolve_ms if resolved else 0.0,
            fallback_ms=resolved.fallback_ms if resolved else 0.0,
            queued_ms=queued_ms,
            execute_ms=execute_ms,
            total_ms=(now - (slot.started or t0)) * 1000,
        )
        return EventResult(
            event_id=slot.request.event_id,
            name=slot.definition.name,
            status=status,
            policy=slot.definition.result_policy,
            arguments=dict(resolved.arguments) if resolved else {},
            resolution=resolved.path if resolved else None,
            result=dict(result or {}),
            error=error,
            error_code=error_code,
            question=question,
            missing=resolved.missing if resolved else (),
            idempotency_key=key,
            fallback_used=resolved.fallback_used if resolved else False,
            fallback_tokens=resolved.fallback_tokens if resolved else 0,
            timings=timings,
        )

    def _audit_result(self, result: EventResult, turn_id: str) -> None:
        self.audit.record("event.result", turn_id=turn_id, **result.as_dict())
