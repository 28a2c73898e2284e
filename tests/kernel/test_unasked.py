"""The kernel refuses a model's request its definition says the child's words do not support (issue 27), without
naming any event: `EventDefinition.supports` decides, the kernel only asks."""

from __future__ import annotations

from dataclasses import replace

from toy_runtime.audit import MemoryAudit
from toy_runtime.events import EventRequest, EventStatus, ResultPolicy, SourceProtocol

from .conftest import kernel_for, make_definition


def only_when_asked(arguments, ctx):
    return "please" in ctx.utterance


async def test_a_model_request_the_words_do_not_support_is_refused_and_audited(recorder, context):
    audit = MemoryAudit()
    end = make_definition("test.end", "end", recorder.handler("end"), policy=ResultPolicy.TERMINATE, terminal=True,
                          supports=only_when_asked, failure_template=lambda args, info: "could not end")
    kernel = kernel_for(end, audit=audit)
    for source in (SourceProtocol.TEXT_EVENTS, SourceProtocol.TOOL_CALLS):
        outcome = await kernel.run_batch(
            _batch(EventRequest(name="test.end", turn_id="t1", source=source, arguments={"n": 1})), context)
        [result] = outcome.results
        assert result.status is EventStatus.REJECTED and result.error_code == "not_asked"
        assert outcome.continuation.lines == () and not outcome.continuation.terminate  # refused silently
    assert recorder.calls == []
    assert [(a["name"], a["reason"]) for a in audit.of("event.refused")] == [("test.end", "not_asked")] * 2


async def test_supported_words_gate_and_host_requests_run(recorder, context):
    end = make_definition("test.end", "end", recorder.handler("end"), supports=only_when_asked)
    kernel = kernel_for(end)
    asked = replace(context, utterance="stop please")
    for ctx, source in ((asked, SourceProtocol.TOOL_CALLS), (context, SourceProtocol.OFFLINE_GATE),
                        (context, SourceProtocol.HOST)):
        outcome = await kernel.run_batch(
            _batch(EventRequest(name="test.end", turn_id="t1", source=source, arguments={"n": 1})), ctx)
        assert outcome.results[0].status is EventStatus.SUCCEEDED, source
    assert len(recorder.calls) == 3


async def test_a_broken_supports_hook_refuses(recorder, context):
    def broken(arguments, ctx):
        raise RuntimeError("boom")

    kernel = kernel_for(make_definition("test.end", "end", recorder.handler("end"), supports=broken))
    outcome = await kernel.run_batch(_batch(EventRequest(name="test.end", turn_id="t1",
                                                         source=SourceProtocol.TOOL_CALLS, arguments={"n": 1})),
                                     context)
    assert outcome.results[0].error_code == "not_asked" and recorder.calls == []


def _batch(*requests):
    from toy_runtime.events import EventBatch
    return EventBatch(session_id="s1", turn_id="t1", requests=tuple(requests))
