"""One contract for the scripted LLM on both transports: the loopback server on the real wire and the in-process
`httpx.MockTransport`. Each case plays one script through `ChatClient` and checks what the client makes of it (text,
tool calls, finish reason, the fault's code, retries), so the in-process transport the conversation tests use cannot
drift from what the SDK meets on a socket."""

from __future__ import annotations

import json

import pytest

from toy_runtime.agent.llm import CallStats, ChatClient, ContentDelta, LLMFault
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.scripted_script import load_script
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

MESSAGES = [{"role": "user", "content": "hi"}]
READ_S = 0.3  # short: the timeout cases wait this long


@pytest.fixture(params=["wire", "in_process"])
def make_llm(request):
    """Builds a scripted LLM of either kind and a ChatClient on it; both closed after the test."""
    made = []

    def build(script=None, **options):
        llm = (ScriptedLLMServer if request.param == "wire" else ScriptedLLMTransport)(script, **options).start()
        client = ChatClient(base_url=llm.url, api_key=None, connect_timeout_s=1.0, read_timeout_s=READ_S,
                            transport=getattr(llm, "transport", None))
        made.append((llm, client))
        return llm, client

    yield build
    for llm, _client in made:
        llm.close()


async def _played(client: ChatClient) -> tuple[str, CallStats]:
    stats = CallStats("contract")
    text = [item.text async for item in client.stream(stats, model="scripted-model", messages=MESSAGES)
            if isinstance(item, ContentDelta)]
    return "".join(text), stats


async def _fault(client: ChatClient) -> str:
    with pytest.raises(LLMFault) as caught:
        await _played(client)
    return caught.value.code


async def test_a_reply_streams_its_text_with_the_providers_usage(make_llm):
    llm, client = make_llm([Reply(text="Hello there!", chunk_size=3)])
    text, stats = await _played(client)
    assert text == "Hello there!" and stats.finish_reason == "stop" and stats.usage_source == "provider"
    assert llm.requests[0]["stream"] is True and llm.requests[0]["stream_options"] == {"include_usage": True}
    await client.aclose()


async def test_tool_calls_come_back_whole(make_llm):
    _llm, client = make_llm([Reply(text="Okay.", tool_calls=[("adjust", '{"value": 30}')], args_chunk_size=4)])
    collected = await client.collect(CallStats("contract"), model="scripted-model", messages=MESSAGES)
    assert collected.content == "Okay." and collected.tool_calls == (("adjust", '{"value": 30}'),)
    await client.aclose()


@pytest.mark.parametrize(("fault", "after", "code"), [
    ("http_500", None, "http_500"),
    ("http_429", None, "http_429"),
    ("http_400", None, "http_400"),
    ("drop_before_done", None, "truncated"),
    ("disconnect", None, "disconnect"),
    ("empty_stream", None, "empty_stream"),
    ("garbage", None, "empty_stream"),  # an HTML page has no `data:` line: the SDK sees no chunk at all
    ("malformed_chunk", None, "protocol"),
    # each waits out READ_S, on both transports: real waits, outside the fast lane
    pytest.param("hang", None, "first_token_timeout", marks=pytest.mark.slow),
    pytest.param("stall", None, "first_token_timeout", marks=pytest.mark.slow),
    pytest.param("hang", 2, "timeout", marks=pytest.mark.slow),
])
async def test_each_fault_is_the_same_fault_on_both(make_llm, fault, after, code):
    _llm, client = make_llm([Reply(text="abcdefghijkl", fault=fault, fault_after_chunks=after)])
    assert await _fault(client) == code
    await client.aclose()


async def test_a_stream_without_usage_is_estimated(make_llm):
    _llm, client = make_llm([Reply(text="Hello there!", fault="no_usage")])
    text, stats = await _played(client)
    assert text == "Hello there!" and stats.usage_source == "estimate" and stats.completion_tokens > 0
    await client.aclose()


async def test_an_expired_keepalive_connection_is_retried_once(make_llm):
    llm, client = make_llm([Reply(text="one", fault="close_keepalive"), Reply(text="two")])
    assert (await _played(client))[0] == "one"
    assert (await _played(client))[0] == "two"
    assert client.retries == 1 and llm.dropped == 1 and len(llm.requests) == 2  # a dropped one is not recorded
    await client.aclose()


async def test_a_rejected_optional_field_is_asked_again_without_it(make_llm):
    llm, client = make_llm(default=Reply(text="fine"), reject_fields=("stream_options",))
    assert (await _played(client))[0] == "fine"
    assert client.unsupported == {"stream_options"}
    assert ["stream_options" in r for r in llm.requests] == [True, False]
    await client.aclose()


async def test_an_empty_script_is_a_500_and_a_script_error(make_llm):
    llm, client = make_llm()
    assert await _fault(client) == "http_500"
    assert llm.errors == ["request 1: no reply left in the script"]
    await client.aclose()


async def test_a_plain_request_answers_one_completion(make_llm):
    _llm, client = make_llm([Reply(text="Whole.", tool_calls=[("f", "{}")])])
    response = await client.complete(CallStats("contract"), model="scripted-model", messages=MESSAGES)
    message = response.choices[0].message
    assert message.content == "Whole." and message.tool_calls[0].function.name == "f"
    await client.aclose()


async def test_a_request_sent_ahead_is_read_by_the_turn_that_asks_the_same(make_llm):
    llm, client = make_llm([Reply(text="warm"), Reply(text="ahead")])
    assert (await _played(client))[0] == "warm"  # builds the client: a prefetch needs one
    assert await client.prefetch(model="scripted-model", messages=MESSAGES)
    text, stats = await _played(client)
    assert text == "ahead" and client.prefetch_hits == 1 and stats.prefetched_ms is not None
    assert len(llm.requests) == 2
    await client.aclose()


async def test_warm_lists_the_models(make_llm):
    _llm, client = make_llm([Reply(text="hi")])
    await client.warm()
    assert client.ready and (await _played(client))[0] == "hi"
    await client.aclose()


@pytest.mark.parametrize("in_process", [False, True], ids=["wire", "in_process"])
async def test_one_script_file_plays_the_same_on_both(tmp_path, in_process):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": [{"match": "volume", "reply": {"text": "Louder!"}}],
                                "replies": [{"text": "First."}], "default": {"text": "Default."}}))
    with load_script(path, in_process=in_process) as llm:
        client = ChatClient(base_url=llm.url, api_key=None, connect_timeout_s=1.0, read_timeout_s=2.0,
                            transport=getattr(llm, "transport", None))
        said = [(await _played(client))[0] for _ in range(2)]
        stats = CallStats("contract")
        louder = [item.text async for item in client.stream(
            stats, model="m", messages=[{"role": "user", "content": "the VOLUME please"}])]
        await client.aclose()
    assert said == ["First.", "Default."] and "".join(louder) == "Louder!"
