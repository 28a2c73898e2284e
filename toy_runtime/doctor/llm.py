"""The doctor's LLM check: one request shaped exactly like a turn's first ChatAgent call.

The request is built by the ChatAgent the runtime would build (persona, the mode's event instruction, `tools` in
chat_agent_tools mode, `stream_options` when `[llm] include_usage` is on) and streamed through the same ChatClient,
so a server that rejects a field a real turn sends is found here and not on the child's first question. The
ChatClient retries without a field the server rejected with HTTP 400 and remembers that for the process: the
doctor reports each such field as a WARN naming the setting that stops sending it.
"""

from __future__ import annotations

from typing import Any

from ..config import Settings
from .verdict import Verdict, fail, fmt_ms, ok, warn

__all__ = ["FIELD_FIXES", "PROBE_UTTERANCE", "SLOW_TTFT_MS", "check_llm", "probe_agent"]

SLOW_TTFT_MS = 2000.0  # a first token later than this makes every spoken answer feel slow
PROBE_UTTERANCE = "Say OK."
PROBE_MAX_TOKENS = 4  # the prompt is the real one; the answer only has to start
NEAR_TIMEOUT = 0.6  # a first token later than this share of first_token_timeout_s leaves too little room

# what a rejected optional field costs, and the setting that stops sending it
FIELD_FIXES: dict[str, tuple[str, str]] = {
    "stream_options": ("token usage is not reported (counts become estimates)",
                       "set [llm] include_usage = false"),
    "tools": ("tool schemas are dropped, so chat_agent_tools has no tools to call",
              "set [agent] tool_invocation_mode = \"dual_agent\" (events as a hidden text block, no schemas)"),
}


def probe_agent(settings: Settings, client: Any) -> Any:
    """The ChatAgent a turn would use, over a registry on in-memory ports (the probe runs no event), with the
    search event advertised exactly when the configuration enables search."""
    from ..agent.chat_agent import ChatAgent, Sampling
    from ..app.runtime import offline_registry
    from ..audit.sink import NullAudit

    registry = offline_registry(settings, as_configured=True)
    llm = settings.llm
    return ChatAgent(client, registry, mode=settings.agent.tool_invocation_mode, model=llm.model,
                     persona=settings.agent.persona, sampling=Sampling(llm.temperature, llm.top_p, PROBE_MAX_TOKENS),
                     audit=NullAudit(), first_clause_min_chars=settings.agent.first_clause_min_chars,
                     tools_reply_first=settings.agent.tools_reply_first)


def _local_hint(settings: Settings) -> str:
    """The one-line fix for a CPU model on the hosted limits: its profile sets all four limits at once."""
    if settings.llm.profile == "local":
        return ""
    return "set [llm] profile = \"local\" (first token 90 s, answer 120 s, events 60 s), or "


def _failure(fault: Any, settings: Settings, prompt: str) -> Verdict:
    llm = settings.llm
    code, message = fault.code, fault.message
    if code == "connect":
        return fail(f"cannot connect to {llm.base_url}: {message}",
                    "is the server running and reachable from here? check llm.base_url (usually ends in /v1)")
    if code == "first_token_timeout":
        return fail(f"{llm.base_url} sent no first token within first_token_timeout_s = "
                    f"{llm.first_token_timeout_s:g} s for a turn's prompt ({prompt})",
                    "a local CPU model spends this in prompt prefill (see docs/local-models.md): "
                    + _local_hint(settings) + "raise [llm] first_token_timeout_s, or use a smaller model; check "
                    "the server's log")
    if code == "timeout":
        return fail(f"{llm.base_url} stopped answering (connect {llm.connect_timeout_s:g} s, between chunks "
                    f"{llm.read_timeout_s:g} s)", "the server stalled mid-answer: check its log, or raise "
                    "[llm] read_timeout_s")
    if code in ("http_401", "http_403"):
        return fail(f"the endpoint refused the API key ({code.replace('_', ' ').upper()}): {message}",
                    "set OPENAI_API_KEY in the environment (secrets are never read from the TOML profile)")
    if code == "http_404":
        return fail(f"HTTP 404: {message}", f"check llm.base_url (…/v1) and llm.model {llm.model!r} "
                    f"(`curl {(llm.base_url or '').rstrip('/')}/models`)")
    if code == "http_429":
        return fail(f"rate limited or out of quota (HTTP 429): {message}", "check the account's quota and limits")
    if code == "http_400":
        return fail(f"the server rejects a turn's request (HTTP 400): {message}",
                    "a context window smaller than the prompt? start the server with a larger one (llama.cpp: "
                    "n_ctx / -c 4096 or more); see docs/local-models.md")
    if code.startswith("http_"):
        return fail(f"HTTP {code[5:]}: {message}", "see the server's log")
    return fail(f"the endpoint does not stream chat completions properly ({code}: {message})",
                "the runtime needs an OpenAI-compatible streaming /chat/completions (SSE chunks with a finish "
                "reason, then data: [DONE])")


async def check_llm(settings: Settings) -> Verdict:
    """Stream a turn-shaped request (see the module doc); report what the server rejected and the first token."""
    llm = settings.llm
    base_url = llm.base_url
    if not base_url:  # settings.llm_online, spelled so the type narrows
        return warn("offline: only the deterministic gate answers",
                    "set llm.base_url (or OPENAI_BASE_URL) to an OpenAI-compatible endpoint, and OPENAI_API_KEY "
                    "if it needs one")
    from ..agent.chat_agent import ReplyRecord
    from ..agent.llm import CallStats, ChatClient, LLMFault, estimate_prompt_tokens

    client = ChatClient(base_url=base_url, api_key=llm.api_key.get_secret_value() if llm.api_key else None,
                        connect_timeout_s=llm.connect_timeout_s, read_timeout_s=llm.read_timeout_s,
                        first_token_timeout_s=llm.first_token_timeout_s, include_usage=llm.include_usage)
    agent = probe_agent(settings, client)
    messages = agent.system_messages(events=True) + [{"role": "user", "content": PROBE_UTTERANCE}]
    tools = agent.tools(events=True)
    shape = f"{settings.agent.tool_invocation_mode}, {len(tools)} tools" if tools else \
        f"{settings.agent.tool_invocation_mode}, no tools"
    stats = CallStats(purpose="doctor")
    try:
        async for _ in agent.stream(stats, messages, ReplyRecord(), turn_id="doctor", allow_events=False,
                                    tools=tools):
            pass
    except LLMFault as exc:
        estimate = estimate_prompt_tokens(messages, tools)
        return _failure(exc, settings, f"{shape}, ~{estimate} prompt tokens, estimated")
    finally:
        await client.aclose()
    ttft = stats.ttft_ms if stats.ttft_ms is not None else stats.first_chunk_ms
    tokens = (f"{stats.prompt_tokens} prompt tokens" if stats.usage_source == "provider"
              else f"~{stats.prompt_tokens} prompt tokens, estimated")
    what = f"{llm.model} at {llm.base_url} streams a turn's request ({shape}, {tokens}); first token in {fmt_ms(ttft)}"
    rejected = [name for name in ("stream_options", "tools") if name in client.unsupported]
    if rejected:
        costs = "; ".join(f"`{name}`: {FIELD_FIXES[name][0]}" for name in rejected)
        return warn(f"{what}, but only after retrying without what the server rejected with HTTP 400 ({costs}); "
                    "the runtime does the same on its first turn and remembers it",
                    "; ".join(FIELD_FIXES[name][1] for name in rejected))
    if ttft is not None and ttft > NEAR_TIMEOUT * llm.first_token_timeout_s * 1000:
        return warn(f"{what}: close to first_token_timeout_s = {llm.first_token_timeout_s:g} s",
                    "a longer prompt (history, a slower moment) will time out: " + _local_hint(settings)
                    + "raise [llm] first_token_timeout_s or use a smaller model (docs/local-models.md)")
    if ttft is not None and ttft > SLOW_TTFT_MS:
        return warn(f"{what}: every spoken answer waits this long",
                    "use a closer or faster endpoint, or a smaller model; with a local server, keep the prompt "
                    "prefix cached (docs/local-models.md)")
    if ttft is not None and ttft > llm.gate_first_token_s * 1000:
        return warn(f"{what}: later than gate_first_token_s = {llm.gate_first_token_s:g} s, so the offline gate "
                    "carries out clear device requests and goodbye (\"mute and bye\") before the model answers",
                    "fine if the gate's fixed lines are what you want; else raise [llm] gate_first_token_s above "
                    "the warm first-token time (docs/local-models.md)")
    return ok(what)
