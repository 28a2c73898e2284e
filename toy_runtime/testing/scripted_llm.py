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
servers do, without consuming a reply; the client's retry without the field gets the reply.
`server.dropped` counts requests dropped by "close_keepalive".

The JSON script-file format and the command line that serves one (`python -m
toy_runtime.testing.scripted_script --script demo.json`) are in `scripted_script.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping, Sequence

from .scripted_wire import Plan, content_text, estimate_prompt_tokens, estimate_tokens  # noqa: F401 (re-export)

log = logging.getLogger(__name__)

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

Responder = Callable[[dict[str, Any]], "Reply | Mapping[str, Any]"]


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


class _Stop(Exception):
    """The client went away or the server is closing: end this response quietly."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, chunked streaming
    server: "_Server"

    def setup(self) -> None:
        super().setup()
        # small SSE writes must leave at once: Nagle + delayed ACK otherwise add ~40 ms to the first token
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("scripted-llm %s - " + format, self.address_string(), *args)

    # ---- routes -------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            owner = self.server.owner
            data = [{"id": owner.model, "object": "model", "created": 0, "owned_by": "scripted"}]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, f"no route GET {self.path}", "not_found_error")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route POST {self.path}", "not_found_error")
            return
        try:
            request = json.loads(raw or b"null")
            if not isinstance(request, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            self._send_error(400, f"invalid JSON body: {exc}", "invalid_request_error")
            return
        owner = self.server.owner
        if getattr(self, "_expired", False):  # "close_keepalive": this connection is treated as timed out
            owner._count_dropped(request)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        rejected = owner._rejected_field(request)
        if rejected is not None:
            self._send_error(400, f"Unsupported param: {rejected} (scripted)", "invalid_request_error",
                             param=rejected)
            return
        number, reply = owner._next_reply(request)
        if reply is None:
            self._send_error(500, "scripted_llm: no reply left in the script", "server_error")
            return
        plan = Plan(reply, request, number, owner.model)
        try:
            if reply.fault in ("http_500", "http_429", "http_400"):
                self._fault_status(reply.fault)
            elif reply.fault == "garbage":
                self._garbage()
            elif request.get("stream"):
                self._stream(plan, request)
            else:
                self._whole(plan)
        except (_Stop, OSError):
            self.close_connection = True
            return
        if reply.fault == "close_keepalive":
            self._expired = True

    # ---- responses ----------------------------------------------------------------------------

    def _fault_status(self, fault: str) -> None:
        if fault == "http_429":
            self._send_error(429, "Rate limit reached (scripted)", "rate_limit_error", {"Retry-After": "1"})
        elif fault == "http_400":
            self._send_error(400, "This model's maximum context length was exceeded (scripted)",
                             "invalid_request_error")
        else:
            self._send_error(500, "The server had an error (scripted)", "server_error")

    def _garbage(self) -> None:
        body = b"<html><body><h1>502 Bad Gateway</h1>upstream went away</body></html>\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, plan: Plan, request: Mapping[str, Any]) -> None:
        reply = plan.reply
        options = request.get("stream_options") or {}
        include_usage = bool(options.get("include_usage")) and reply.fault != "no_usage"
        deltas = plan.deltas()
        fault_at = reply.fault_after_chunks
        if fault_at is None:
            fault_at = len(deltas) // 2 if reply.fault in ("disconnect", "malformed_chunk") else len(deltas)
        if reply.fault == "hang" and reply.fault_after_chunks is None:
            self._hang()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if reply.fault == "empty_stream":
            self._end_body()
            return
        if reply.fault == "stall":
            self._hang(reply.release)
            return
        self._pause(reply.delay_s, reply.release)
        self._write(plan.chunk({"role": "assistant", "content": ""}, with_usage=include_usage))
        for n, delta in enumerate(deltas):
            if n == fault_at and self._stream_fault(reply.fault):
                return
            self._pause(reply.chunk_delay_s)
            self._write(plan.chunk(delta, with_usage=include_usage))
        if len(deltas) <= fault_at and self._stream_fault(reply.fault):
            return
        self._pause(reply.chunk_delay_s)
        self._write(plan.chunk({}, plan.finish_reason, with_usage=include_usage))
        if include_usage:
            self._write(plan.usage_chunk())
        self._write(b"data: [DONE]\n\n")
        self._end_body()

    def _stream_fault(self, fault: str | None) -> bool:
        """Apply a mid-stream fault at its point; True when the response is over."""
        if fault == "drop_before_done":
            self._end_body()
            return True
        if fault == "disconnect":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # body left incomplete on purpose
            return True
        if fault == "hang":
            self._hang()
            return True
        if fault == "malformed_chunk":
            self._write(b"data: {\"id\": \"chatcmpl-broken\", \"choices\": [\n\n")
        return False

    def _whole(self, plan: Plan) -> None:
        fault = plan.reply.fault
        if fault in ("hang", "stall"):
            self._hang(plan.reply.release)
            return
        self._pause(plan.reply.delay_s, plan.reply.release)
        body = json.dumps(plan.completion(with_usage=fault != "no_usage"), ensure_ascii=False).encode()
        if fault == "empty_stream":
            body = b""
        elif fault == "malformed_chunk":
            body = body[: len(body) // 2]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if fault in ("drop_before_done", "disconnect"):
            self.close_connection = True
            self.wfile.write(body[: len(body) // 2])  # fewer bytes than Content-Length promised
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, kind: str, headers: Mapping[str, str] | None = None,
                    param: str | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": param, "code": None}}, headers)

    # ---- low level ----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))  # one HTTP chunk per SSE event

    def _end_body(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _pause(self, seconds: float, release: threading.Event | None = None) -> None:
        stopping = self.server.owner._stopping
        if seconds <= 0 or (release is not None and release.is_set()):
            return
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if stopping.wait(min(left, 0.02)):
                raise _Stop
            if release is not None and release.is_set():
                return

    def _hang(self, release: threading.Event | None = None) -> None:
        """Send nothing until the client disconnects, the server closes, or `release` is set."""
        self.close_connection = True
        stopping = self.server.owner._stopping
        while not stopping.wait(0.05):
            if release is not None and release.is_set():
                return
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return  # the client closed its end (timed out)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ScriptedLLMServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response is routine here (timeouts, fault tests): no traceback spam.
        log.debug("scripted-llm: connection from %s ended with an error", client_address, exc_info=True)


class ScriptedLLMServer:
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
        `reject_fields`: request fields answered with a 400 naming them ("stream_options", "tools")."""
        self.model = model
        self.reject_fields = tuple(reject_fields)
        self.dropped = 0
        self.default = default
        self._responder: Responder | None = script if callable(script) else None
        self._queue: deque[Reply] = deque()
        if script is not None and not callable(script):
            self.add(*script)
        self._host, self._port = host, port
        self._lock = threading.RLock()  # re-entrant: a responder may read server.requests
        self._requests: list[dict[str, Any]] = []
        self._errors: list[str] = []
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- script ---------------------------------------------------------------------------------

    def add(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Append replies to the queue."""
        for reply in replies:
            self._queue.append(reply if isinstance(reply, Reply) else Reply.from_dict(reply))

    @property
    def pending(self) -> int:
        """Replies still queued."""
        return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat completion request body received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[str]:
        """Script problems seen while serving (exhausted queue, responder exceptions)."""
        with self._lock:
            return list(self._errors)

    def _rejected_field(self, request: dict[str, Any]) -> str | None:
        """The first `reject_fields` entry this request carries (recorded like any request), else None."""
        for name in self.reject_fields:
            if request.get(name) and (name != "tools" or request.get("stream")):
                with self._lock:
                    self._requests.append(request)
                return name
        return None

    def _count_dropped(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.dropped += 1

    def _next_reply(self, request: dict[str, Any]) -> tuple[int, Reply | None]:
        with self._lock:
            self._requests.append(request)
            number = len(self._requests)
            try:
                if self._responder is not None:
                    answer = self._responder(request)
                    reply = answer if isinstance(answer, Reply) or answer is None else Reply.from_dict(answer)
                elif self._queue:
                    reply = self._queue.popleft()
                else:
                    reply = None
            except Exception as exc:  # a broken script must show up in the test, not kill the server thread
                self._errors.append(f"request {number}: responder raised {exc!r}")
                return number, None
            if reply is None:
                reply = self.default
            if reply is None:
                self._errors.append(f"request {number}: no reply left in the script")
            return number, reply

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
        server = _Server((self._host, self._port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake hanging responses and drop open connections. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # unblocks keep-alive handlers waiting for a next request
            except OSError:
                pass
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

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
