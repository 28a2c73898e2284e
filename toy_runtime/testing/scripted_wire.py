"""The wire format of the scripted LLM server: Chat Completions chunks, bodies and rough token counts.

Kept apart from the server (`scripted_llm.py`) and its HTTP handler (`scripted_http.py`) so the fault handling and
the OpenAI payload shapes each stay small. Nothing here does I/O.
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

from ..language import estimate_tokens
from .scripted_reply import Reply


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def estimate_prompt_tokens(request: Mapping[str, Any]) -> int:
    """Rough prompt size of a request: messages (plus per-message overhead), tool calls and tool schemas."""
    total = 0
    for message in request.get("messages") or ():
        total += 4 + estimate_tokens(content_text(message.get("content")))
        if message.get("tool_calls"):
            total += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    if request.get("tools"):
        total += estimate_tokens(json.dumps(request["tools"], ensure_ascii=False))
    return total


def _split(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


class Plan:
    """The wire chunks of one reply to one request."""

    def __init__(self, reply: "Reply", request: Mapping[str, Any], number: int, model: str) -> None:
        self.reply = reply
        self.id = f"chatcmpl-scripted-{number}"
        self.created = int(time.time())
        self.model = str(request.get("model") or model)
        self.calls = [(f"call_{number}_{i}", name, args) for i, (name, args) in enumerate(reply.tool_calls)]
        self.finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        completion = estimate_tokens(reply.text) + sum(estimate_tokens(n + a) + 3 for _, n, a in self.calls)
        self.usage = {"prompt_tokens": estimate_prompt_tokens(request), "completion_tokens": completion}
        self.usage.update(reply.usage or {})
        self.usage["total_tokens"] = self.usage["prompt_tokens"] + self.usage["completion_tokens"]

    def deltas(self) -> list[dict[str, Any]]:
        """Content and tool-call deltas in stream order (the role chunk and finish chunk excluded)."""
        content = [{"content": piece} for piece in _split(self.reply.text, self.reply.chunk_size)]
        tools: list[dict[str, Any]] = []
        for index, (call_id, name, args) in enumerate(self.calls):
            head = {"index": index, "id": call_id, "type": "function"}
            fragments = _split(args, self.reply.args_chunk_size) or [""]
            for n, fragment in enumerate(fragments):
                if n == 0 or self.reply.repeat_id_and_name:
                    entry = {**head, "function": {"name": name, "arguments": fragment}}
                else:
                    entry = {"index": index, "function": {"arguments": fragment}}
                tools.append({"tool_calls": [entry]})
        return content + tools if self.reply.content_then_tools else tools + content

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None, with_usage: bool = False) -> bytes:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if with_usage:
            body["usage"] = None  # OpenAI sends null usage on every chunk when usage was requested
        return sse(body)

    def usage_chunk(self) -> bytes:
        return sse(
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": self.usage,
            }
        )

    def completion(self, with_usage: bool) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None}
        if self.calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in self.calls
            ]
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}],
        }
        if with_usage:
            body["usage"] = self.usage
        return body


def sse(body: Any) -> bytes:
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


