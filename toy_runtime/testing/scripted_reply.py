"""One scripted answer (`Reply`) and the faults it can play: the unit a scripted LLM script is made of.

Pure data: what `scripted_http.py` plays out on the wire and `scripted_llm.py` queues; the fault modes are described
in `scripted_llm.py`'s docstring.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

__all__ = ["FAULTS", "Reply"]

FAULTS = (
    "http_500",
    "http_429",
    "drop_before_done",
    "disconnect",
    "empty_stream",
    "hang",
    "no_usage",
    "malformed_chunk",
    "stall",
    "garbage",
    "http_400",
    "close_keepalive",
)


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one chat completion request."""

    text: str = ""  # visible content; may contain an <agent_events> block
    tool_calls: Sequence[tuple[str, str]] = ()  # (name, arguments JSON string); dict arguments are dumped
    chunk_size: int = 4  # characters per content delta; 0 = all text in one delta
    args_chunk_size: int = 6  # characters per tool-call argument fragment; 0 = one fragment
    repeat_id_and_name: bool = False  # mimic servers that repeat id and full name in every tool delta
    delay_s: float = 0.0  # after the headers, before the first chunk (time to first token)
    chunk_delay_s: float = 0.0  # between chunks
    content_then_tools: bool = True  # False streams the tool calls first
    usage: Mapping[str, int] | None = None  # prompt_tokens / completion_tokens; missing keys are estimated
    finish_reason: str | None = None  # default: "tool_calls" when there are calls, else "stop"
    fault: str | None = None  # one of FAULTS
    fault_after_chunks: int | None = None  # where the fault hits, in content/tool deltas (see module doc)
    release: threading.Event | None = field(default=None, compare=False)  # ends delay_s / "stall" when set

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; expected one of {', '.join(FAULTS)}")
        calls = []
        for call in self.tool_calls:
            if isinstance(call, Mapping):
                name, arguments = call["name"], call.get("arguments", "")
            else:
                name, arguments = call
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            calls.append((str(name), arguments))
        object.__setattr__(self, "tool_calls", tuple(calls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Reply":
        """Build a reply from its JSON script form; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown reply keys: {', '.join(sorted(unknown))}")
        return cls(**data)


# `reject_fields` entries that reject one FORM of a field, as local servers do: the param named in the error, the
# message, the HTTP status; and the test that a request carries that form
REJECTIONS: dict[str, tuple[str, str, int]] = {
    "tool_choice_object": ("tool_choice", "tool_choice: must be string (scripted, like llama-server)", 400),
    "tool_choice_required": ("tool_choice", "tool_choice: unsupported value 'required' (scripted)", 400),
    "response_format_json_schema": ("response_format", "response_format: type must be 'json_object' (scripted)",
                                    400),
    # llama-cpp-python answers its own request-validation error with a 500
    "response_format_json_schema_500": ("response_format", "1 validation error: body.response_format.type: Input "
                                        "should be 'text' or 'json_object' (scripted)", 500),
}
REJECTIONS_MATCH: dict[str, Callable[[dict[str, Any]], bool]] = {
    "tool_choice_object": lambda r: isinstance(r.get("tool_choice"), dict),
    "tool_choice_required": lambda r: r.get("tool_choice") == "required",
    "response_format_json_schema": lambda r: (r.get("response_format") or {}).get("type") == "json_schema",
    "response_format_json_schema_500": lambda r: (r.get("response_format") or {}).get("type") == "json_schema",
}
