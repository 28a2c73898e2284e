"""The bench's truth measures (issue 27): promises left standing, unasked disruptive events, the child's language.

They judge from the spoken text and the dataset's labels, not from the runtime's own audit."""

from __future__ import annotations

from toy_runtime.bench.truth import group_truth, spoken_language, turn_truth
from toy_runtime.events import EventResult, EventStatus, ResultPolicy
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import default_registry
from toy_runtime.session.items import Speech

REGISTRY = default_registry(memory_ports())
VOLUME, TERMINATE = "device.volume.adjust", "session.terminate"


def result(name: str, status: EventStatus = EventStatus.SUCCEEDED, code: str | None = None) -> EventResult:
    return EventResult(event_id=f"ev_{name}", name=name, status=status, policy=list(ResultPolicy)[0], arguments={},
                       resolution=None, error_code=code)


def test_the_language_of_an_answer_is_what_most_of_it_is_written_in():
    assert spoken_language("好的，Pip 把声音调小了。") == "zh"
    assert spoken_language("Hello there, 你好! How are you today?") == "en"
    assert spoken_language("") is None and spoken_language("!!") is None


def test_a_promise_with_no_event_counts_until_a_correction_is_spoken():
    promise = [Speech(answer=1, text="Okay, I've turned the volume down.")]
    truth = turn_truth("turn it down", promise, [], [VOLUME], REGISTRY)
    assert truth["unbacked_claims"] == [VOLUME] and truth["promises_left"] == [VOLUME]
    from toy_runtime.events import not_run_lines

    [line] = not_run_lines([VOLUME], REGISTRY.lookup, "en")
    corrected = promise + [Speech(answer=2, text=line, kind="correction")]
    truth = turn_truth("turn it down", corrected, [], [VOLUME], REGISTRY)
    assert truth["unbacked_claims"] == [VOLUME] and truth["promises_left"] == []
    backed = turn_truth("turn it down", promise, [result(VOLUME)], [VOLUME], REGISTRY)
    assert backed["unbacked_claims"] == [] and backed["promises_left"] == []


def test_a_disruptive_event_the_labels_do_not_expect_is_unasked_only_when_it_succeeded():
    spoken = [Speech(answer=1, text="Here is a joke.")]
    assert turn_truth("tell me a joke", spoken, [result(TERMINATE)], [], REGISTRY)["unasked_disruptive"] == [TERMINATE]
    refused = result(TERMINATE, EventStatus.FAILED, "not_asked")
    assert turn_truth("tell me a joke", spoken, [refused], [], REGISTRY)["unasked_disruptive"] == []
    assert turn_truth("bye", spoken, [result(TERMINATE)], [TERMINATE], REGISTRY)["unasked_disruptive"] == []


def test_the_group_counts_chinese_turns_answered_in_chinese():
    rows = [turn_truth("把声音调小一点", [Speech(answer=1, text="好的！")], [], [], REGISTRY),
            turn_truth("讲个故事", [Speech(answer=1, text="Once upon a time there was a cat.")], [], [], REGISTRY),
            turn_truth("hi", [Speech(answer=1, text="Hi!")], [], [], REGISTRY)]
    truth = group_truth(rows)
    assert (truth["zh_turns"], truth["zh_answered_in_zh"], truth["en_turns_answered_in_zh"]) == (2, 1, 0)
