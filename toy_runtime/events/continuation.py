"""Aggregation of a batch's results into what the runtime does next, driven only by result policies."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from .definition import NOT_ASKED, EventDefinition
from .model import EventResult, EventStatus, ResultPolicy

log = logging.getLogger(__name__)

GENERIC_FAILURE_LINE = "Sorry, that didn't work."
# Said when something the model asked for never ran (unknown name, unclosed block, a request in a follow-up round):
# truthful without knowing what was meant.
NOT_RUN_LINES = {"en": "Hmm, I couldn't do that just now.", "zh": "嗯，我刚才没能做到。"}


@dataclass(frozen=True)
class Continuation:
    """The kernel's decision after a batch.

    `lines` are spoken deterministically, in order (confirmations, corrections, questions), without an LLM call.
    `follow_up` holds succeeded results that need ONE aggregated ChatAgent follow-up call; empty when none or when
    terminating (a failed llm_follow_up event gets its failure line instead: there is no evidence to follow up on).
    `terminate` ends the session after the lines are spoken.
    """

    lines: tuple[str, ...] = ()
    follow_up: tuple[EventResult, ...] = ()
    terminate: bool = False

    @property
    def needs_llm(self) -> bool:
        return bool(self.follow_up) and not self.terminate

    def as_dict(self) -> dict:
        return {
            "lines": list(self.lines),
            "follow_up": [r.event_id for r in self.follow_up],
            "terminate": self.terminate,
        }


def _failure_line(definition: EventDefinition, result: EventResult, locale: str) -> str:
    if definition.failure_template is not None:
        try:
            return definition.failure_template(result.arguments, {"error": result.error, "code": result.error_code,
                                                                  "status": result.status.value, **result.result,
                                                                  "locale": locale})
        except Exception:  # a broken template must not lose the correction
            log.warning("the failure template of %s failed; saying the generic line", definition.name, exc_info=True)
    return GENERIC_FAILURE_LINE


def aggregate(results: Sequence[EventResult], definitions: dict[str, EventDefinition],
              locale: str = "en") -> Continuation:
    """Deterministic lines first (in input order), then at most one follow-up; terminate suppresses the follow-up.

    Templates receive the session locale as `info["locale"]` so lines come out in the child's language.
    """
    lines: list[str] = []
    follow_up: list[EventResult] = []
    terminate = False
    for result in results:
        definition = definitions[result.name]
        status = result.status
        if status is EventStatus.SKIPPED_DUPLICATE:
            continue
        if result.error_code == NOT_ASKED:
            continue  # nobody asked for it: a failure line would be news; a spoken claim of it is corrected by the turn
        if status in (EventStatus.NEEDS_CLARIFICATION, EventStatus.NEEDS_CONFIRMATION):
            if result.question:
                lines.append(result.question)
            continue
        policy = result.policy
        if status is not EventStatus.SUCCEEDED:
            # also for llm_follow_up: a follow-up is built from evidence, and a failure has none, so the model
            # would only guess (or pretend it looked). The definition's short truthful line is said instead.
            lines.append(_failure_line(definition, result, locale))
            continue
        if policy is ResultPolicy.LLM_FOLLOW_UP:
            follow_up.append(result)
            continue
        if policy is ResultPolicy.TERMINATE:
            terminate = True
        elif policy is ResultPolicy.TEMPLATE_FOLLOW_UP and definition.success_template is not None:
            try:
                lines.append(definition.success_template(result.arguments, {**result.result, "locale": locale}))
            except Exception:  # a broken template loses its line, never the turn
                log.warning("the success template of %s failed; its line is left out", definition.name,
                            exc_info=True)
    if terminate:
        follow_up = []
    # de-duplicate identical lines (e.g. two failing events with the same generic correction)
    unique = tuple(dict.fromkeys(lines))
    return Continuation(lines=unique, follow_up=tuple(follow_up), terminate=terminate)


def not_run_lines(names: Iterable[str], lookup: Callable[[str], EventDefinition | None],
                  locale: str = "en") -> tuple[str, ...]:
    """Corrections for requests that never ran: the definition's own failure line when the name is known
    (its template sees `code="not_run"`), else one generic line. No LLM call; identical lines are said once."""
    lines: list[str] = []
    for name in names:
        definition = lookup(name) if name else None
        line = NOT_RUN_LINES.get(locale, NOT_RUN_LINES["en"])
        if definition is not None and definition.failure_template is not None:
            try:
                line = definition.failure_template({}, {"code": "not_run", "status": "not_run", "error": None,
                                                        "locale": locale})
            except Exception:  # a broken template still leaves the generic correction
                log.warning("the failure template of %s failed; saying the generic line", definition.name,
                            exc_info=True)
        lines.append(line)
    return tuple(dict.fromkeys(lines))
