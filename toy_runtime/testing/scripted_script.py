"""Scripted LLM replies from a JSON file, and the command line that serves them (for demos).

Command line, for demos (`toy-runtime chat --llm-base-url http://127.0.0.1:8765/v1`):

    python -m toy_runtime.testing.scripted_script --port 8765 --script demo.json

Script file format (JSON; every key optional):

    {
      "model": "scripted-model",
      "rules": [                                   # tried first, in order, on every request
        {"match": "volume|louder",                 # regex searched (case-insensitive) in the last message
         "role": "user",                           # optional: role of the last message
         "tools": false,                           # optional: whether the request carries `tools`
         "reply": {"text": "Okay!<agent_events>device.volume.adjust</agent_events>"}}
      ],
      "replies": [{"text": "Hello there.", "chunk_size": 3}],   # then consumed one per request
      "default": {"text": "Sorry, I have nothing scripted for that."}
    }

A reply object has the `Reply` fields; `tool_calls` is a list of `{"name": ..., "arguments": {...} or
"json string"}` (or `[name, arguments]` pairs).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Sequence

from .scripted_llm import Reply, ScriptedLLMServer
from .scripted_transport import ScriptedLLMTransport
from .scripted_wire import content_text

__all__ = ["load_script", "main"]


def _last_message(request: Mapping[str, Any]) -> Mapping[str, Any]:
    messages = request.get("messages") or [{}]
    return messages[-1] if isinstance(messages[-1], Mapping) else {}


def load_script(path: str | Path, *, host: str = "127.0.0.1", port: int = 0,
                in_process: bool = False) -> ScriptedLLMServer | ScriptedLLMTransport:
    """Build an (unstarted) server from a JSON script file; see the module docstring for the format. `in_process`:
    the same script played through an httpx MockTransport instead (`scripted_transport.py`; no socket)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    rules = [
        (
            re.compile(rule.get("match", ""), re.IGNORECASE),
            rule.get("role"),
            rule.get("tools"),
            Reply.from_dict(rule["reply"]),
        )
        for rule in data.get("rules", ())
    ]
    queue = deque(Reply.from_dict(r) for r in data.get("replies", ()))
    default = Reply.from_dict(data["default"]) if "default" in data else None

    def respond(request: dict[str, Any]) -> Reply | None:
        last = _last_message(request)
        text = content_text(last.get("content"))
        for pattern, role, tools, reply in rules:
            if role is not None and last.get("role") != role:
                continue
            if tools is not None and bool(request.get("tools")) != tools:
                continue
            if pattern.search(text):
                return reply
        return queue.popleft() if queue else None  # None → the server's default

    model = data.get("model", "scripted-model")
    if in_process:
        return ScriptedLLMTransport(respond, default=default, model=model)
    return ScriptedLLMServer(respond, default=default, model=model, host=host, port=port)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script file until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m toy_runtime.testing.scripted_script", description="Serve a scripted OpenAI-compatible LLM."
    )
    parser.add_argument("--script", required=True, help="JSON script file (format in the module docstring)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    server = load_script(args.script, host=args.host, port=args.port)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with server:
        print(f"scripted LLM serving on {server.url}", flush=True)
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
