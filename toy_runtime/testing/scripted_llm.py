"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests and demos.

Real HTTP/1.1 on a loopback socket (stdlib only): `POST /v1/chat/completions` with `stream: true`
(SSE `data: {...}` chunks in chunked transfer encoding, then `data: [DONE]`) or `stream: false`
(one JSON body), and `GET /v1/models`. Point the real client at it:

    with ScriptedLLMServer([Reply(text="Hi!")]) as server:          # or: async with
        client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)
        ...
        server.requests[-1]["tools"]                                 # every request body, in order

Each chat request takes one `Reply`: from a callable `(request_body) -> Reply`, or else from the
queue given at construction (extend it with `add()`), or else `default`. With nothing left the
server answers 500 and records the problem in `server.errors`. Remember the openai client retries
5xx/429 (twice by default) and every retry consumes a reply: use `max_retries=0` in fault tests.

A `Reply` streams `text` in `chunk_size`-character content deltas, then (or before, with
`content_then_tools=False`) each tool call as OpenAI-style deltas: the first carries id, type and
name, the rest `args_chunk_size`-character argument fragments (with `repeat_id_and_name=True` every
delta repeats id and full name, like some servers do). Then a chunk with `finish_reason` ("tool_calls"
when there are calls, else "stop"), a usage chunk when the request asked for
`stream_options.include_usage`, and `data: [DONE]`. Usage defaults to rough token estimates
(about 4 characters per token, one per CJK character) of the request and the reply.

Faults (`Reply.fault`):

- "http_500", "http_429"  error status with an OpenAI-style error body (→ `openai.APIStatusError`)
- "drop_before_done"      streams the deltas, then ends the body cleanly with no finish_reason,
                          no usage and no `[DONE]` (the client sees a stream that simply stops)
- "disconnect"            closes the socket mid-body (→ `openai.APIConnectionError`)
- "empty_stream"          200 and an empty body: no chunk at all
- "hang"                  sends nothing, not even headers, until the client gives up (→ `APITimeoutError`)
- "stall"                 sends the headers, then nothing until the client gives up (a first-token timeout)
- "garbage"               200 with a body that is not SSE at all (an HTML error page)
- "http_400"              400 with an OpenAI-style error that names no optional field (e.g. a prompt too long)
- "close_keepalive"       answers normally, then treats the connection as expired: the next request that
                          arrives on it is read and dropped unanswered (the race a client with a pooled
                          keep-alive connection meets on llama-server; → `APIConnectionError`)
- "no_usage"              never sends usage, even when asked
- "malformed_chunk"       one `data:` line that is not JSON, mid-stream

`fault_after_chunks` moves the fault point for "drop_before_done", "disconnect", "malformed_chunk"
and "hang" to after that many content/tool-call deltas (for "hang" this means headers and those
chunks are sent, then the stream stalls: a mid-stream read timeout). Non-stream requests honour the
faults in the obvious way (truncated body, empty body, non-JSON body, no answer).

`Reply.release` (a `threading.Event`) ends the `delay_s` pause (and a "stall") as soon as it is set, so a
test can hold the first token until it has seen what it waits for, without racing a wall clock.

Server options: `reject_fields=("stream_options",)` (or `"tools"`) answers every request that carries
the field (for "tools": a streamed request) with 400 and an OpenAI-style error naming it, as some local
servers do, without consuming a reply; the client's retry without the field gets the reply. Entries that
reject one form of a field: "tool_choice_object" (a named `tool_choice` object: "must be string"),
"tool_choice_required" (`tool_choice: "required"`), "response_format_json_schema" (and "…_500", answered with
500 like llama-cpp-python).
`server.dropped` counts requests dropped by "close_keepalive".

The JSON script-file format and the command line that serves one (`python -m
toy_runtime.testing.scripted_script --script demo.json`) are in `scripted_script.py`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, Iterable, Mapping

from .scripted_http import ScriptedHandler, ScriptedHTTPServer
from .scripted_queue import ReplyScript, Responder
from .scripted_reply import FAULTS, REJECTIONS, REJECTIONS_MATCH, Reply  # noqa: F401 (re-export: the script's unit)
from .scripted_wire import content_text, estimate_prompt_tokens, estimate_tokens  # noqa: F401 (re-export)


class ScriptedLLMServer(ReplyScript):
    """A loopback Chat Completions server answering from a script; see the module docstring."""

    def __init__(
        self,
        script: Iterable[Reply | Mapping[str, Any]] | Responder | None = None,
        *,
        default: Reply | None = None,
        model: str = "scripted-model",
        host: str = "127.0.0.1",
        port: int = 0,
        reject_fields: Iterable[str] = (),
    ) -> None:
        """`script`: replies consumed one per request, or a callable answering each request body;
        `reject_fields`: request fields answered with a 400 naming them ("stream_options", "tools", or one form
        of a field: see scripted_reply.REJECTIONS)."""
        super().__init__(script, default=default, model=model, reject_fields=reject_fields)
        self._host, self._port = host, port
        self._connections: set[socket.socket] = set()
        self._server: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The base URL for the openai client (ends in /v1)."""
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> "ScriptedLLMServer":
        """Bind and serve in a daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = ScriptedHTTPServer((self._host, self._port), ScriptedHandler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_until_stopped, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake hanging responses and drop open connections. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.stop_serving()
        if self._thread is not None:
            self._thread.join(timeout=5)  # the accept loop has ended: no new handler starts
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # unblocks keep-alive handlers waiting for a next request
            except OSError:
                pass
        server.server_close()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "ScriptedLLMServer":
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)  # shutdown() waits for the serve loop; keep the event loop free
