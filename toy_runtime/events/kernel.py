"""The generic event kernel: resolve → validate → confirm → dedupe → schedule → execute → aggregate.

It runs on definition metadata only; it never names or compares a concrete event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from ..audit.sink import AuditSink, NullAudit
from ..audit.kinds import AuditKind
from .continuation import Continuation, aggregate
from .definition import NOT_ASKED, EventDefinition, EventFailure, ExecutionContext, ResolveContext
from .fallback import ArgumentFallback
from .idempotency import IdempotencyStore, canonical_json, idempotency_key
from .model import (EventBatch, EventRequest, EventResult, EventStatus, EventTimings, ResolutionPath,
                    SourceProtocol)
from .registry import EventRegistry
from .resolution import ResolvedArguments, resolve_request

log = logging.getLogger(__name__)

ResultCallback = Callable[[EventResult], None]
# asked when a definition that requires confirmation declares no question of its own
CONFIRMATION_QUESTIONS = {"en": "Are you sure? Say yes or no.", "zh": "确定吗？请说好或者不要。"}
_MODEL_SOURCES = frozenset({SourceProtocol.TEXT_EVENTS, SourceProtocol.TOOL_CALLS})


@dataclass(frozen=True)
class BatchOutcome:
    """Results in input order plus the continuation decision."""

    results: tuple[EventResult, ...]
    continuation: Continuation
    dropped: tuple[str, ...]  # unknown names that were never executed
    elapsed_ms: float
    dispatch_delays_ms: tuple[float, ...]  # per result: detection → processing started


@dataclass
class _Slot:
    """Book-keeping for one request while its batch runs."""

    index: int
    request: EventRequest
    definition: EventDefinition
    resolved: asyncio.Future  # ResolvedArguments | None, set once resolution ends
    done: asyncio.Future  # EventResult, set once the event has a final result
    detected_at: float
    started: float = 0.0
    task: asyncio.Task | None = None
    executing: bool = False  # the handler has been called
    # the child said yes to these arguments in an earlier turn: they run as they were asked about, unresolved again
    confirmed: ResolvedArguments | None = None


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
        self.definitions = {d.name: d for d in registry}
        # shared by every batch: a remote command and a turn's event of the same class never overlap either
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # started handlers of discarded turns (BatchRun.abort): held here until they finish, so none is collected
        self.standing: set[asyncio.Task] = set()

    @contextlib.asynccontextmanager
    async def exclusive(self, keys: frozenset[str]):
        """Hold the locks of these concurrency classes (sorted, so two holders never deadlock)."""
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(keys):
                await stack.enter_async_context(self._locks[key])
            yield

    async def run_batch(
        self,
        batch: EventBatch,
        context: ResolveContext,
        *,
        session_id: str | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        """Run one complete batch to its end (or deadline); never raises for an event's failure."""
        run = self.open_batch(session_id or batch.session_id, batch.turn_id, context, on_result=on_result)
        for request in batch.requests:
            run.add(request)
        run.close()
        return await run.wait()

    def open_batch(
        self,
        session_id: str,
        turn_id: str,
        context: ResolveContext,
        *,
        on_result: ResultCallback | None = None,
        use_fallback: bool = True,
    ) -> "BatchRun":
        """Start a batch that requests join while the model is still streaming.

        Each `add()` starts that request at once (dispatch never waits for the reply to end); `close()` says no more
        will come, which releases terminal events; `wait()` returns the outcome. The batch deadline runs from the
        dispatch (the first request added, or the close if none came), never from here: a long reply before its
        first event must not eat the events' time. `use_fallback=False`: incomplete arguments are never sent to
        the EventAgent (structured requests with no words to read, e.g. a remote command): they get the
        clarification result instead.
        """
        return BatchRun(self, session_id, turn_id, context, on_result, use_fallback=use_fallback)

    async def execute(self, definition: EventDefinition, arguments: Mapping[str, Any], ctx: ExecutionContext):
        """Call the handler with the definition's timeout and (read-only only) retries."""
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
            except Exception as exc:
                status, error, code = EventStatus.FAILED, f"{type(exc).__name__}: {exc}", "handler_error"
            self.audit.record(AuditKind.EVENT_ATTEMPT_FAILED, event_id=ctx.event_id, name=definition.name,
                              attempt=attempt + 1, of=attempts, error=error)
        return status, payload, error, code


class BatchRun:
    """One batch in flight. Created by `EventKernel.open_batch`."""

    def __init__(self, kernel: EventKernel, session_id: str, turn_id: str, context: ResolveContext,
                 on_result: ResultCallback | None, *, use_fallback: bool) -> None:
        self.kernel = kernel
        self.fallback = kernel.fallback if use_fallback else None
        self.session_id = session_id
        self.turn_id = turn_id
        self.context = context
        self.on_result = on_result
        self.t0 = time.perf_counter()
        self.slots: list[_Slot] = []
        self.dropped: list[str] = []
        self._closed = asyncio.Event()
        self._closed_at: float | None = None
        self._dispatched_at: float | None = None  # when the deadline starts: first request added, or the close
        self._aborted = False
        self._loop = asyncio.get_running_loop()

    @property
    def audit(self) -> AuditSink:
        return self.kernel.audit

    @property
    def acted(self) -> list[tuple[str, dict[str, Any], str]]:
        """The events of this batch whose handler has been called, as (name, arguments, status): side effects that
        stand even if the turn is discarded (`abort` cancels only what has not started). The status is the
        result's, or "started" while the handler runs."""
        acted = []
        for slot in self.slots:
            if slot.executing:
                resolved = self._resolved_or_none(slot)
                arguments = resolved.arguments if resolved is not None else slot.request.arguments
                done = slot.done.done() and not slot.done.cancelled()
                status = slot.done.result().status.value if done else "started"
                acted.append((slot.definition.name, dict(arguments or {}), status))
        return acted

    @property
    def changed_something(self) -> bool:
        """Whether a handler that is not read-only has been called: an action that must not run twice."""
        return any(slot.executing and not slot.definition.read_only for slot in self.slots)

    def add(self, request: EventRequest, *, detected_at: float | None = None,
            confirmed: Mapping[str, Any] | None = None) -> bool:
        """Start one request now. Returns False (and audits) when its name is unknown: it is never executed.

        `confirmed`: the arguments the child already said yes to (a pending confirmation answered in a later turn):
        they are neither resolved again (this turn's words are only "yes") nor asked about a second time.
        """
        if self._closed.is_set():
            raise RuntimeError("batch already closed")
        definition = self.kernel.registry.lookup(request.name)
        if definition is None:
            self.dropped.append(request.name)
            self.audit.record(AuditKind.EVENT_DROPPED, event_id=request.event_id, name=request.name, turn_id=self.turn_id,
                              reason="unknown_event")
            return False
        if definition.name != request.name:  # a provider tool name: map back to the namespaced name
            request = replace(request, name=definition.name)
        self.audit.record(AuditKind.EVENT_DETECTED, event_id=request.event_id, name=request.name, turn_id=self.turn_id,
                          source=request.source.value, proposed=dict(request.arguments or {}),
                          arguments_error=request.arguments_error)
        if self._dispatched_at is None:
            self._dispatched_at = self._loop.time()  # deadlines on the loop's clock, the one its timeouts use
        slot = _Slot(len(self.slots), request, definition, self._loop.create_future(), self._loop.create_future(),
                     detected_at=detected_at if detected_at is not None else time.perf_counter())
        if confirmed is not None:
            slot.confirmed = ResolvedArguments(arguments=dict(confirmed), path=ResolutionPath.DETERMINISTIC,
                                               outcome="resolved")
        self.slots.append(slot)
        slot.task = asyncio.create_task(self._run_slot(slot), name=f"event:{request.name}:{request.event_id}")
        return True

    def close(self) -> None:
        """No more requests will join this batch."""
        if self._closed_at is None:
            self._closed_at = self._loop.time()
        if self._dispatched_at is None:
            self._dispatched_at = self._closed_at
        self._closed.set()

    def abort(self) -> list[str]:
        """The turn was discarded (barge-in, shutdown): cancel every request whose handler has not started.

        Handlers already running are acknowledged side effects and may finish. Returns the cancelled event ids.
        """
        self._aborted = True
        cancelled = []
        for slot in self.slots:
            if slot.task is None or slot.task.done():
                continue
            if slot.executing:  # it stands: kept until it finishes
                self.kernel.standing.add(slot.task)
                slot.task.add_done_callback(self.kernel.standing.discard)
            else:
                slot.task.cancel()
                cancelled.append(slot.request.event_id)
        self._closed.set()  # after the cancels: 3.11's wait_for may swallow a cancel that races a completed wait
        if cancelled:
            self.audit.record(AuditKind.BATCH_ABORTED, turn_id=self.turn_id, cancelled=cancelled)
        return cancelled

    async def wait(self) -> BatchOutcome:
        """Wait for every request to reach a result or the batch deadline; results come back in input order."""
        try:
            await asyncio.wait_for(self._closed.wait(), timeout=max(self._deadline_left(), 0.001))
        except TimeoutError:
            self._closed.set()
        tasks = [slot.task for slot in self.slots if slot.task is not None]
        try:
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=max(self._deadline_left(), 0.0))
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=1.0)
        except asyncio.CancelledError:
            self.abort()  # the turn was discarded while its events ran (a barge-in): as abort() says
            raise
        finally:
            # no task outlives the batch but a started handler of a discarded turn (abort() keeps it: it stands)
            for slot in self.slots:
                running = slot.task
                if running is not None and not running.done() and not (self._aborted and slot.executing):
                    running.cancel()

        results: list[EventResult] = []
        for slot in self.slots:
            if slot.done.done() and not slot.done.cancelled():
                results.append(slot.done.result())
                continue
            result = self._result(slot, EventStatus.TIMED_OUT, self._resolved_or_none(slot),
                                  error=f"batch deadline of {self.kernel.batch_deadline_s:g}s passed",
                                  error_code="batch_deadline")
            self._publish(slot, result)
            results.append(result)

        continuation = aggregate(results, self.kernel.definitions, self.context.locale)
        elapsed = (time.perf_counter() - self.t0) * 1000
        delays = tuple(round(((s.started or s.detected_at) - s.detected_at) * 1000, 3) for s in self.slots)
        self.audit.record(AuditKind.BATCH_COMPLETED, turn_id=self.turn_id, events=[r.name for r in results],
                          statuses=[r.status.value for r in results], dropped=self.dropped,
                          dispatch_delay_ms=list(delays), continuation=continuation.as_dict(), ms=round(elapsed, 3))
        return BatchOutcome(tuple(results), continuation, tuple(self.dropped), elapsed, delays)

    # -- one request --------------------------------------------------------------------------------

    async def _run_slot(self, slot: _Slot) -> None:
        slot.started = time.perf_counter()
        result: EventResult | None = None
        try:
            result = await self._process(slot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a kernel bug for one event must not take its siblings down
            result = self._result(slot, EventStatus.FAILED, self._resolved_or_none(slot),
                                  error=f"internal error: {exc}", error_code="internal_error")
        finally:
            if not slot.resolved.done():
                slot.resolved.set_result(None)
            if result is not None:
                self._publish(slot, result)

    def _publish(self, slot: _Slot, result: EventResult) -> None:
        if slot.done.done():
            return
        self.audit.record(AuditKind.EVENT_RESULT, turn_id=self.turn_id, **result.as_dict())
        slot.done.set_result(result)
        if self.on_result:
            self.on_result(result)

    async def _process(self, slot: _Slot) -> EventResult:
        definition, request, kernel = slot.definition, slot.request, self.kernel
        if slot.confirmed is None and self._unasked(slot, None):
            # the words do not ask for this kind of action at all: no fallback call, no "which level?" question
            return self._result(slot, EventStatus.REJECTED, None, error_code=NOT_ASKED,
                                error="the child's words do not ask for this")
        resolved = slot.confirmed or await resolve_request(kernel.registry, definition, request, self.context,
                                                           self.fallback, self.audit)
        slot.resolved.set_result(resolved)
        if resolved.outcome == "invalid":
            return self._result(slot, EventStatus.REJECTED, resolved, error=resolved.error,
                                error_code=resolved.error_code, question=resolved.question)
        if resolved.outcome == "incomplete":
            return self._result(slot, EventStatus.NEEDS_CLARIFICATION, resolved, question=resolved.question,
                                error=f"missing or ambiguous: {', '.join(resolved.missing)}",
                                error_code="needs_clarification")
        if slot.confirmed is None and self._unasked(slot, resolved):  # a yes the child gave is its own support
            return self._result(slot, EventStatus.REJECTED, resolved, error_code=NOT_ASKED,
                                error="the child's words do not ask for this")
        if definition.requires_confirmation and slot.confirmed is None:
            return self._result(slot, EventStatus.NEEDS_CONFIRMATION, resolved,
                                question=self._confirmation_question(definition, resolved),
                                error_code="needs_confirmation")

        duplicate_of = await self._earlier_duplicate(slot, resolved)
        if duplicate_of is not None:
            return self._result(slot, EventStatus.SKIPPED_DUPLICATE, resolved, result={"duplicate_of": duplicate_of})

        key = idempotency_key(self.session_id, request.turn_id, request.event_id, definition.name, resolved.arguments)
        store = kernel.idempotency
        earlier = await store.claim(key)
        if earlier is not None:
            self.audit.record(AuditKind.EVENT_IDEMPOTENT_REPLAY, event_id=request.event_id, name=definition.name, key=key)
            return replace(earlier, replayed=True)

        result: EventResult | None = None
        try:
            await self._wait_for_turn(slot)
            queued_at = time.perf_counter()
            async with kernel.exclusive(definition.lock_keys), kernel.semaphore:
                if self._aborted:  # the turn was discarded while this event waited for its turn
                    raise asyncio.CancelledError
                exec_started = time.perf_counter()
                slot.executing = True
                ctx = ExecutionContext(session_id=self.session_id, turn_id=request.turn_id,
                                       event_id=request.event_id, idempotency_key=key)
                status, payload, error, code = await kernel.execute(definition, resolved.arguments, ctx)
                exec_ms = (time.perf_counter() - exec_started) * 1000
            result = self._result(slot, status, resolved, result=payload, error=error, error_code=code, key=key,
                                  queued_ms=(exec_started - queued_at) * 1000, execute_ms=exec_ms)
            return result
        finally:
            if result is None:  # cancelled (deadline): waiters get a timed-out view, nothing is remembered
                result = self._result(slot, EventStatus.TIMED_OUT, resolved, key=key, error_code="cancelled")
            await store.finish(key, result, remember=result.status is not EventStatus.TIMED_OUT)

    def _unasked(self, slot: _Slot, resolved: ResolvedArguments | None) -> bool:
        """A model's request its definition says the child's words do not support (audited): it is never run.
        Only model proposals are checked: the gate acts on the words themselves, a host command has none.
        Asked twice: before resolution with no arguments (do the words ask for this kind of action at all?) and
        after it with the resolved ones (do they ask for this one: a mute, not just a change)."""
        definition, request = slot.definition, slot.request
        if definition.supports is None or request.source not in _MODEL_SOURCES:
            return False
        arguments = resolved.arguments if resolved is not None else {}
        try:
            supported = definition.supports(arguments, self.context)
        except Exception:  # a broken hook must not let a disruptive action through
            log.warning("the `supports` hook of %s failed; the request is refused", definition.name, exc_info=True)
            supported = False
        if not supported:
            self.audit.record(AuditKind.EVENT_REFUSED, event_id=request.event_id, name=definition.name,
                              turn_id=self.turn_id, source=request.source.value, reason=NOT_ASKED,
                              arguments=dict(resolved.arguments) if resolved is not None else dict(
                                  request.arguments or {}))
        return not supported

    async def _earlier_duplicate(self, slot: _Slot, resolved: ResolvedArguments) -> str | None:
        """Event id of an earlier same-name request with equivalent normalized arguments, if any.

        An earlier request from the offline gate settles its definition for the batch whatever the arguments: the
        gate acted on the child's clear words (e.g. while the model stalled), so the model's later request for the
        same thing ("down by 20" where the gate ran "down") is that request again, not a second one.
        """
        mine = canonical_json(resolved.arguments)
        for other in self.slots[: slot.index]:
            if other.definition is not slot.definition:
                continue
            theirs = await asyncio.shield(other.resolved)
            if theirs is None or theirs.outcome != "resolved":
                continue
            if canonical_json(theirs.arguments) == mine or (other.request.source is SourceProtocol.OFFLINE_GATE
                                                            and slot.request.source is not SourceProtocol.OFFLINE_GATE):
                return other.request.event_id
        return None

    async def _wait_for_turn(self, slot: _Slot) -> None:
        """Conflicting earlier events finish first; a terminal event waits for every sibling (bounded)."""
        keys = slot.definition.lock_keys
        blockers = [o.done for o in self.slots[: slot.index] if keys and (o.definition.lock_keys & keys)]
        if blockers:
            await asyncio.wait(blockers)
        if not slot.definition.terminal:
            return
        # Wait until no more siblings can join (the reply ended), then for every sibling — the barrier is timed from
        # the close, so a long reply never uses it up; the batch deadline still bounds the whole wait.
        await self._closed.wait()
        siblings = [o.done for o in self.slots if o is not slot and not o.definition.terminal]
        remaining = (self._closed_at or self._loop.time()) + self.kernel.terminal_barrier_s - self._loop.time()
        if siblings and remaining > 0:
            await asyncio.wait(siblings, timeout=remaining)

    # -- helpers ------------------------------------------------------------------------------------

    def _confirmation_question(self, definition: EventDefinition, resolved: ResolvedArguments) -> str:
        """The definition's question in the child's language; a generic one (never the event's name: it is said
        aloud) when it has none or its template breaks."""
        locale = self.context.locale
        if definition.confirmation_question is not None:
            try:
                return definition.confirmation_question(resolved.arguments, {"locale": locale})
            except Exception:  # a broken template must not lose the question
                log.warning("the confirmation question of %s failed; asking the generic one", definition.name,
                            exc_info=True)
        return CONFIRMATION_QUESTIONS.get(locale, CONFIRMATION_QUESTIONS["en"])

    def _deadline_left(self) -> float:
        """Seconds left of the batch deadline; the full deadline while nothing has been dispatched yet."""
        if self._dispatched_at is None:
            return self.kernel.batch_deadline_s
        return self.kernel.batch_deadline_s - (self._loop.time() - self._dispatched_at)

    @staticmethod
    def _resolved_or_none(slot: _Slot) -> ResolvedArguments | None:
        if slot.resolved.done() and not slot.resolved.cancelled():
            return slot.resolved.result()
        return None

    def _result(self, slot: _Slot, status: EventStatus, resolved: ResolvedArguments | None, *,
                result: Mapping[str, Any] | None = None, error: str | None = None, error_code: str | None = None,
                question: str | None = None, key: str | None = None, queued_ms: float = 0.0,
                execute_ms: float = 0.0) -> EventResult:
        now = time.perf_counter()
        timings = EventTimings(
            resolve_ms=resolved.resolve_ms if resolved else 0.0,
            fallback_ms=resolved.fallback_ms if resolved else 0.0,
            queued_ms=queued_ms,
            execute_ms=execute_ms,
            total_ms=(now - (slot.started or self.t0)) * 1000,
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
