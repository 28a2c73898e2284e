"""The scripted LLM on the wire: an HTTP handler that plays one `Reply` out as Chat Completions (streamed SSE or one
body), with its fault, and the threading server it runs in. The script, the records and the lifecycle are the
owner's (`scripted_llm.ScriptedLLMServer`); the payload shapes are `scripted_wire.py`'s.
"""

from __future__ import annotations

import json
import logging
import select
import selectors
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ..errors import ToyError
from .scripted_reply import REJECTIONS
from .scripted_wire import Plan

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping

__all__ = ["ScriptedHTTPServer", "ScriptedHandler"]

log = logging.getLogger("toy_runtime.testing.scripted_llm")


class _Stop(ToyError):
    """The client went away or the server is closing: end this response quietly."""

    code = "response_stopped"


class ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, chunked streaming
    server: "ScriptedHTTPServer"

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
            param, message, status = REJECTIONS.get(rejected, (rejected, f"Unsupported param: {rejected} (scripted)",
                                                               400))
            self._send_error(status, message, "invalid_request_error", param=param)
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
                with self.server.owner._lock:  # a real local server stops generating here (if it streams)
                    self.server.owner.abandoned += 1
                return  # the client closed its end (timed out, or its caller gave up)


class ScriptedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: Any  # the ScriptedLLMServer that holds the script and the records

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_r, self._wake_w = socket.socketpair()

    def serve_until_stopped(self) -> None:
        """`serve_forever` without its poll: `stop_serving()` wakes the loop at once. (`serve_forever`'s shutdown
        waits up to a poll interval, 25 ms on average at 0.05 s; the suite starts and stops ~300 servers.)"""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._wake_r in ready:
                    return
                # serve_forever's own step; private to BaseServer, so typeshed leaves it out
                self._handle_request_noblock()  # type: ignore[attr-defined]

    def stop_serving(self) -> None:
        """Make `serve_until_stopped` return (call `server_close` after its thread ended)."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response is routine here (timeouts, fault tests): no traceback spam.
        log.debug("scripted-llm: connection from %s ended with an error", client_address, exc_info=True)
