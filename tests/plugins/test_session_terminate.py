"""session.terminate: terminal, idempotent, runs after its siblings, never pretends on failure."""

from toy_runtime.events import EventStatus, ResultPolicy, Risk, SourceProtocol
from toy_runtime.plugins import session_terminate
from toy_runtime.plugins.session_terminate import NAME, TOOL_NAME

from .helpers import ctx, request, resolve, run

VOLUME = "device.volume.adjust"


def test_metadata(registry):
    d = registry.get(NAME)
    assert registry.by_tool_name(TOOL_NAME) is d
    assert d.terminal and d.result_policy is ResultPolicy.TERMINATE and d.risk is Risk.HIGH
    assert d.idempotent and d.concurrency_class == "session.lifecycle" and not d.llm_fallback


def test_resolver(registry):
    assert resolve(registry, NAME, "bye!").arguments == {}
    assert resolve(registry, NAME, "", {"reason": "  user   said bye "}).arguments == {"reason": "user said bye"}
    assert resolve(registry, NAME, "", {"reason": "", "mood": "sad"}).arguments == {}
    assert session_terminate.resolve({"reason": "x" * 500}, ctx()).arguments["reason"] == "x" * 200
    assert not registry.validator(NAME).is_valid({"reason": 3})


async def test_terminates_once_per_event(kernel, ports):
    outcome = await run(kernel, request(NAME, {"reason": "goodbye"}, event_id="ev_end1"), utterance="bye bye")
    result = outcome.results[0]
    assert result.status is EventStatus.SUCCEEDED and result.result["terminated"] is True
    assert outcome.continuation.terminate and outcome.continuation.lines == ()
    assert ports.session.calls == [("goodbye", "ev_end1")]
    again = await run(kernel, request(NAME, {"reason": "goodbye"}, event_id="ev_end1"), utterance="bye bye")
    assert again.results[0].replayed and ports.session.ended == 1


async def test_port_is_idempotent_by_event_id(ports):
    first = await ports.session.end_session(None, "ev_x")
    second = await ports.session.end_session(None, "ev_x")
    assert first == second and ports.session.ended == 1 and len(ports.session.calls) == 2


async def test_runs_after_siblings_even_when_listed_first(kernel, ports):
    order = []
    outcome = await run(kernel, request(NAME), request(VOLUME, {"mode": "absolute", "value": 20}),
                        on_result=lambda r: order.append(r.name), utterance="volume twenty and bye")
    assert order == [VOLUME, NAME]
    assert [r.name for r in outcome.results] == [NAME, VOLUME]  # results stay in input order
    assert ports.mixer.level == 20 and outcome.continuation.terminate


async def test_failure_is_spoken_and_does_not_terminate(kernel, ports):
    ports.session.error = RuntimeError("dialogue service down")
    outcome = await run(kernel, request(NAME), utterance="goodbye")
    assert outcome.results[0].status is EventStatus.FAILED
    assert not outcome.continuation.terminate
    assert outcome.continuation.lines == ("Sorry, I couldn't end our chat just now.",)


async def test_a_model_may_not_end_the_session_unasked(kernel, ports):
    """Issue 27: "volume at forty" is no goodbye; the model's terminate is refused, a host's command is not."""
    outcome = await run(kernel, request(NAME), utterance="volume at forty")
    assert outcome.results[0].error_code == "not_asked" and not outcome.continuation.terminate
    assert outcome.continuation.lines == () and ports.session.calls == []
    host = await run(kernel, request(NAME, source=SourceProtocol.HOST))
    assert host.results[0].status is EventStatus.SUCCEEDED


def test_supports_reads_a_farewell_or_stop_in_either_language(registry):
    d = registry.get(NAME)
    for utterance in ("bye bye", "ok I have to go now", "thanks, good night", "please stop", "再见", "我不聊了"):
        assert d.supports({}, ctx(utterance)), utterance
    for utterance in ("volume at forty", "tell me a cat joke", "remind me to feed the cat", "don't stop the story",
                      "讲个故事", ""):
        assert not d.supports({}, ctx(utterance)), utterance


def test_offline_gate_only_for_a_plain_farewell(registry):
    d = registry.get(NAME)
    for utterance in ("goodbye", "Bye bye!", "ok, bye", "再见", "拜拜啦", "good night",
                      "Thanks Pip, goodbye!", "好的，谢谢你，再见！"):  # both left unmarked by the real 1.5B model
        assert d.gate_match(ctx(utterance)), utterance
    for utterance in ("say goodbye to grandma", "goodbye and turn off the lights", "bye the way, what's up", "",
                      "thanks for the story, can you say goodbye in French?", "好的，谢谢你"):
        assert not d.gate_match(ctx(utterance)), utterance
    assert d.gate_reply({}, {})
