"""A scripted "oracle" ChatAgent/EventAgent for ScriptedLLMServer: answers every request from the dataset labels.

It recognizes the turn by the user's text and answers in the protocol the request asks for:

- a first answer with the dual_agent catalog → the turn's reply + `<agent_events>names</agent_events>`;
- a first answer with `tools` → the reply + one native tool call per expected event, with the labelled arguments;
- a first answer with neither (events disabled) → the reply only;
- a follow-up (a tool-role message, or a last user message starting with "[event results]") → a second answer
  grounded in the returned evidence;
- an EventAgent forced call (`tool_choice` is an object) → the labelled arguments of that event (only the known
  ones for an event that needs clarification: the oracle never guesses).

It only selects events that the request actually offers, so a disabled condition gets no events. Timing is
configurable (`Pacing`): time to first token = `ttft_base_s + prompt_tokens * prefill_s_per_token`, then one chunk
per `decode_s_per_token`, so the prompt-size effect of tool schemas is visible in TTFT.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Mapping, Sequence

from ..agent.prompts import CLOSE, EVIDENCE_CLOSE, EVIDENCE_OPEN, OPEN, RESULTS_PREFIX
from ..language import guess_locale
from ..testing.scripted_llm import Reply, ScriptedLLMServer, estimate_prompt_tokens, estimate_tokens
from .dataset import TOOL_NAMES, Dataset, ExpectedEvent, Turn, concrete_arguments, text_key

ToolOrder = Literal["content_first", "tools_first", "tools_only"]

DEFAULT_REPLY = {"en": "Okay!", "zh": "好的！"}
UNKNOWN_REPLY = "Hmm, let me think about that."
_EA_UTTERANCE = re.compile(r"^User request: (?P<text>.*?)\nStill needed:", re.S)


@dataclass(frozen=True)
class Pacing:
    """How fast the oracle answers. All zero = as fast as the loopback allows (tests)."""

    ttft_base_s: float = 0.0
    prefill_s_per_token: float = 0.0
    decode_s_per_token: float = 0.0  # one chunk (`chunk_chars` characters, about a token) per step
    chunk_chars: int = 4
    tool_order: ToolOrder = "content_first"  # how a direct-mode reply orders visible text and tool calls

    @classmethod
    def realistic(cls, tool_order: ToolOrder = "content_first") -> "Pacing":
        """A hosted-provider-like profile: 200 ms base, 2,500 prompt tokens/s prefill, ~67 tokens/s decode."""
        return cls(ttft_base_s=0.20, prefill_s_per_token=0.0004, decode_s_per_token=0.015, chunk_chars=4,
                   tool_order=tool_order)

    def ttft_s(self, prompt_tokens: int) -> float:
        return self.ttft_base_s + prompt_tokens * self.prefill_s_per_token

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class OracleStats:
    """What the oracle was asked (thread-safe counters, read after a run)."""

    first_answers: int = 0
    follow_ups: int = 0
    event_agent: int = 0
    unknown_texts: list[str] = field(default_factory=list)


class Oracle:
    """A ScriptedLLMServer responder: `ScriptedLLMServer(Oracle(dataset, ...))`."""

    def __init__(self, dataset: Dataset, *, request_time: datetime, timezone: str,
                 pacing: Pacing | None = None) -> None:
        self.turns = dataset.by_text()
        self.languages = {text_key(t.user): c.lang for c, _, t in dataset.turns()}
        self.request_time = request_time
        self.timezone = timezone
        self.pacing = pacing or Pacing()
        self.stats = OracleStats()
        self._lock = threading.Lock()

    # -- the responder ----------------------------------------------------------------------------

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = list(request.get("messages") or [])
        prompt_tokens = estimate_prompt_tokens(request)
        if isinstance(request.get("tool_choice"), Mapping):
            return self._event_agent(request, messages, prompt_tokens)
        if is_follow_up(messages):
            return self._follow_up(messages, prompt_tokens)
        return self._first_answer(request, messages, prompt_tokens)

    def proposal(self, event: ExpectedEvent) -> dict[str, Any]:
        """The tool-call arguments a perfect model proposes for a labelled event."""
        return concrete_arguments(event, self.request_time, self.timezone)

    # -- request kinds ----------------------------------------------------------------------------

    def _first_answer(self, request: Mapping[str, Any], messages: list[dict[str, Any]], prompt_tokens: int) -> Reply:
        with self._lock:
            self.stats.first_answers += 1
        text = _content(_last(messages, "user"))
        turn = self._lookup(text)
        lang = self._lang(text)
        reply = (turn.reply if turn and turn.reply else DEFAULT_REPLY[lang]) if turn else UNKNOWN_REPLY
        expected = list(turn.expected_events) if turn else []
        catalog = "\n".join(_content(m) for m in messages if m.get("role") == "system" and OPEN in _content(m))
        offered_tools = {t.get("function", {}).get("name") for t in request.get("tools") or ()}
        if catalog:
            names = list(dict.fromkeys(e.name for e in expected if f"- {e.name}:" in catalog))
            body = reply + (f"{OPEN}{', '.join(names)}{CLOSE}" if names else "")
            return self._reply(body, prompt_tokens)
        calls = [(TOOL_NAMES[e.name], self.proposal(e)) for e in expected if TOOL_NAMES[e.name] in offered_tools]
        if calls and self.pacing.tool_order == "tools_only":
            reply = ""
        return self._reply(reply, prompt_tokens, calls, content_then_tools=self.pacing.tool_order == "content_first")

    def _follow_up(self, messages: list[dict[str, Any]], prompt_tokens: int) -> Reply:
        with self._lock:
            self.stats.follow_ups += 1
        results: list[dict[str, Any]] = []
        tool_messages = _after_last_user(messages, "tool")
        if tool_messages:
            for message in tool_messages:
                results.extend(_json_items(_content(message)))
            user_text = _content(_last(messages, "user"))
        else:
            body = _content(messages[-1])
            start = body.find(EVIDENCE_OPEN)
            end = body.find(EVIDENCE_CLOSE, start + len(EVIDENCE_OPEN)) if start >= 0 else -1
            results = _json_items(body[start + len(EVIDENCE_OPEN):end].strip()) if 0 <= start < end else []
            earlier = [m for m in messages[:-1] if m.get("role") == "user"]
            user_text = _content(earlier[-1]) if earlier else ""
        return self._reply(grounded_answer(results, self._lang(user_text)), prompt_tokens)

    def _event_agent(self, request: Mapping[str, Any], messages: list[dict[str, Any]], prompt_tokens: int) -> Reply:
        with self._lock:
            self.stats.event_agent += 1
        tool_name = str(request["tool_choice"].get("function", {}).get("name", ""))
        match = _EA_UTTERANCE.match(_content(_last(messages, "user")))
        turn = self._lookup(match.group("text")) if match else None
        arguments: dict[str, Any] = {}
        for event in (turn.expected_events if turn else ()):
            if TOOL_NAMES[event.name] == tool_name:
                arguments = self.proposal(event)
                break
        return self._reply("", prompt_tokens, [(tool_name, arguments)], whole=True)

    # -- helpers ----------------------------------------------------------------------------------

    def _lookup(self, text: str) -> Turn | None:
        turn = self.turns.get(text_key(text))
        if turn is None and text:
            with self._lock:
                self.stats.unknown_texts.append(text)
        return turn

    def _lang(self, text: str) -> str:
        lang = self.languages.get(text_key(text))
        if lang:
            return lang
        return guess_locale(text)

    def _reply(self, text: str, prompt_tokens: int, calls: Sequence[tuple[str, Mapping[str, Any]]] = (), *,
               content_then_tools: bool = True, whole: bool = False) -> Reply:
        pacing = self.pacing
        delay = pacing.ttft_s(prompt_tokens)
        if whole:  # a non-streamed answer arrives all at once, after prefill and the whole decode
            completion = estimate_tokens(text) + sum(estimate_tokens(n + json.dumps(a)) + 3 for n, a in calls)
            delay += completion * pacing.decode_s_per_token
        return Reply(text=text, tool_calls=[(name, json.dumps(dict(args), ensure_ascii=False)) for name, args in calls],
                     chunk_size=pacing.chunk_chars, args_chunk_size=pacing.chunk_chars, delay_s=delay,
                     chunk_delay_s=pacing.decode_s_per_token, content_then_tools=content_then_tools)


def start_oracle_server(oracle: Oracle, *, model: str = "scripted-model") -> ScriptedLLMServer:
    """A started ScriptedLLMServer answering from `oracle` (it sets TCP_NODELAY like production HTTP servers)."""
    return ScriptedLLMServer(oracle, model=model).start()


def grounded_answer(results: Sequence[Mapping[str, Any]], lang: str) -> str:
    """A short second answer built only from the evidence in the compact results."""
    for item in results:
        result = item.get("result") or {}
        evidence = result.get("evidence") or []
        if item.get("status") == "succeeded" and evidence:
            top = evidence[0]
            snippet = str(top.get("snippet") or top.get("title") or "").strip()
            if lang == "zh":
                return f"我查到了！{snippet} 这是从{top.get('title', '网上')}看到的。"
            return f"I looked it up! {snippet} That's from {top.get('title', 'the web')}."
    return "抱歉，我现在查不到，我们等一下再试试。" if lang == "zh" else "Sorry, I couldn't check that just now."


def is_follow_up(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A direct-mode follow-up has tool messages after the last user message (earlier turns' calls stand in the
    history before it); a dual_agent follow-up ends with the results message."""
    if _after_last_user(messages, "tool"):
        return True
    last = messages[-1] if messages else {}
    return last.get("role") == "user" and _content(last).startswith(RESULTS_PREFIX)


def _after_last_user(messages: Sequence[Mapping[str, Any]], role: str) -> list[Mapping[str, Any]]:
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    return [m for m in messages[(users[-1] if users else 0):] if m.get("role") == role]


def _last(messages: Sequence[Mapping[str, Any]], role: str) -> Mapping[str, Any]:
    for message in reversed(messages):
        if message.get("role") == role:
            return message
    return {}


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def _json_items(text: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if isinstance(value, dict):
        return [value]
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
