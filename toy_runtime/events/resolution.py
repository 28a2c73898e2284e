"""Argument resolution for one request: provider args → deterministic normalization → optional LLM fallback → schema."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from ..audit.sink import AuditSink
from ..audit.kinds import AuditKind
from .definition import EventDefinition, Resolution, ResolveContext
from .fallback import ArgumentFallback
from .model import EventRequest, ResolutionPath
from .registry import EventRegistry


@dataclass(frozen=True)
class ResolvedArguments:
    """The outcome of resolution: either valid arguments or a reason they are not."""

    arguments: Mapping[str, Any]
    path: ResolutionPath
    outcome: str  # "resolved" | "incomplete" | "invalid"
    missing: tuple[str, ...] = ()
    error: str | None = None
    error_code: str | None = None
    question: str | None = None
    fallback_used: bool = False
    fallback_tokens: int = 0
    resolve_ms: float = 0.0
    fallback_ms: float = 0.0


def schema_errors(registry: EventRegistry, name: str, arguments: Mapping[str, Any]) -> list[str]:
    """Human-readable JSON-Schema violations, most specific first (memoized per normalized arguments)."""
    return list(registry.schema_errors(name, arguments))


def _safe_resolve(definition: EventDefinition, proposed: Mapping[str, Any] | None, context: ResolveContext) -> Resolution:
    try:
        return definition.resolver(proposed, context)
    except Exception as exc:  # a resolver bug must become a structured failure, not a crashed turn
        return Resolution(arguments={}, error=f"resolver failed: {exc}", error_code="resolver_error")


def resolve_deterministic(
    registry: EventRegistry, definition: EventDefinition, proposed: Mapping[str, Any] | None, context: ResolveContext
) -> ResolvedArguments:
    """Deterministic resolution + validation only (no LLM) — what `events resolve` prints."""
    started = time.perf_counter()
    resolution = _safe_resolve(definition, proposed, context)
    path = ResolutionPath.PROVIDER if proposed else ResolutionPath.DETERMINISTIC
    return _finish(registry, definition, resolution, path, started)


def _finish(
    registry: EventRegistry,
    definition: EventDefinition,
    resolution: Resolution,
    path: ResolutionPath,
    started: float,
    *,
    fallback_used: bool = False,
    fallback_tokens: int = 0,
    fallback_ms: float = 0.0,
) -> ResolvedArguments:
    elapsed = (time.perf_counter() - started) * 1000 - fallback_ms
    common: dict[str, Any] = dict(path=path, fallback_used=fallback_used, fallback_tokens=fallback_tokens,
                                  resolve_ms=elapsed, fallback_ms=fallback_ms)
    if resolution.error:
        return ResolvedArguments(arguments=dict(resolution.arguments), outcome="invalid", error=resolution.error,
                                 error_code=resolution.error_code or "invalid_arguments",
                                 question=resolution.question, **common)
    if not resolution.complete:
        missing = tuple(dict.fromkeys(resolution.missing + resolution.ambiguous))
        return ResolvedArguments(arguments=dict(resolution.arguments), outcome="incomplete", missing=missing,
                                 question=resolution.question, error_code="incomplete_arguments", **common)
    errors = schema_errors(registry, definition.name, resolution.arguments)
    if errors:
        return ResolvedArguments(arguments=dict(resolution.arguments), outcome="invalid", error="; ".join(errors),
                                 error_code="schema_violation", **common)
    return ResolvedArguments(arguments=dict(resolution.arguments), outcome="resolved", **common)


async def resolve_request(
    registry: EventRegistry,
    definition: EventDefinition,
    request: EventRequest,
    context: ResolveContext,
    fallback: ArgumentFallback | None,
    audit: AuditSink,
) -> ResolvedArguments:
    """Full resolution for one request, using the EventAgent fallback only when still incomplete."""
    started = time.perf_counter()
    proposed = dict(request.arguments) if request.arguments else None
    path = ResolutionPath.PROVIDER if proposed else ResolutionPath.DETERMINISTIC
    resolution = _safe_resolve(definition, proposed, context)
    audit.record(AuditKind.EVENT_RESOLUTION, event_id=request.event_id, name=definition.name, path=path.value,
                 complete=resolution.complete, missing=list(resolution.missing + resolution.ambiguous),
                 error=resolution.error, arguments_error=request.arguments_error)
    if (resolution.complete or resolution.error or resolution.needs_user or not definition.llm_fallback
            or fallback is None):
        return _finish(registry, definition, resolution, path, started)

    missing = tuple(dict.fromkeys(resolution.missing + resolution.ambiguous))
    fb_started = time.perf_counter()
    try:
        answer = await fallback.propose(definition, resolution.arguments or proposed, missing, context,
                                        turn_id=request.turn_id)
    except Exception as exc:  # EventAgent failure must not break the turn: fall back to clarification
        audit.record(AuditKind.EVENT_FALLBACK, event_id=request.event_id, name=definition.name, ok=False, error=str(exc))
        return _finish(registry, definition, resolution, path, started, fallback_used=True,
                       fallback_ms=(time.perf_counter() - fb_started) * 1000)
    fallback_ms = (time.perf_counter() - fb_started) * 1000
    audit.record(AuditKind.EVENT_FALLBACK, event_id=request.event_id, name=definition.name, ok=answer.error is None,
                 error=answer.error, arguments=dict(answer.arguments or {}), tokens=answer.tokens,
                 ms=round(fallback_ms, 3))
    if not answer.arguments:
        return _finish(registry, definition, resolution, path, started, fallback_used=True,
                       fallback_tokens=answer.tokens, fallback_ms=fallback_ms)
    merged = {**(resolution.arguments or {}), **answer.arguments}
    # the fallback's answer is normalized by the same deterministic resolver: the LLM never bypasses it
    second = _safe_resolve(definition, merged, context)
    return _finish(registry, definition, second, ResolutionPath.LLM_FALLBACK, started, fallback_used=True,
                   fallback_tokens=answer.tokens, fallback_ms=fallback_ms)
