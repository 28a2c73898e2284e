"""The generic event kernel. It never imports, compares or branches on a concrete event name."""

from .continuation import Continuation, aggregate, not_run_lines
from .definition import EventDefinition, EventFailure, ExecutionContext, Resolution, ResolveContext
from .fallback import ArgumentFallback, FallbackAnswer, ScriptedFallback
from .idempotency import (
    IdempotencyStore,
    MemoryResultStore,
    ResultStore,
    canonical_json,
    idempotency_key,
    result_from_json,
    result_to_json,
)
from .kernel import BatchOutcome, BatchRun, EventKernel
from .model import (
    EventBatch,
    EventRequest,
    EventResult,
    EventStatus,
    EventTimings,
    ResolutionPath,
    ResultPolicy,
    Risk,
    SourceProtocol,
    new_event_id,
)
from .registry import EventRegistry, UnknownEvent
from .resolution import ResolvedArguments, resolve_deterministic, resolve_request, schema_errors

__all__ = [name for name in dir() if not name.startswith("_")]
