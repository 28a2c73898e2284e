"""The console's HTTP server (aiohttp): the page and its assets, a server-sent event stream, and the controls.

Who may use it:
- Bound to loopback without a token: only requests whose Host is this loopback address (a page on another site
  cannot reach it through DNS rebinding), and controls only from this page (Origin, JSON body: a form on another
  site cannot post one).
- With a token (required off loopback): every request carries it, as the `toy_console` cookie that
  `/?token=…` sets once (HttpOnly, SameSite=Strict) or as `Authorization: Bearer …`; controls check the Origin too.
Every control is audited; refusals too, the first few per peer in full and the rest summarised (`refusals.py`).
Against a hostile neighbour: a whole request header within `header_timeout_s` (aiohttp's idle timeout, which runs
from the moment a connection opens), at most `max_connections` open with the untrusted ones closed first
(`listener.py`), and malformed requests logged as one short line each within a budget (`log_budget.py`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from importlib import resources
from typing import Any, cast

from aiohttp import web

from ..audit import AuditKind
from .controls import ControlError, Controls
from .hub import ConsoleHub
from .listener import ConsoleListener
from .log_budget import BadRequestLogFilter
from .refusals import RefusalLedger

__all__ = ["ConsoleServer"]

COOKIE = "toy_console"
KEEPALIVE_S = 15.0
TICK_S = 15.0  # how often pending refusal summaries and held log lines are written
MAX_AUDITED_PATH = 200
log = logging.getLogger("toy_runtime.web")
_CLOSED = {"type": "closed"}
_ASSETS = {"app.js": "text/javascript", "style.css": "text/css", "index.html": "text/html"}


class ConsoleServer:
    """Serves one runtime's console on HOST:PORT until `aclose()`."""

    def __init__(self, hub: ConsoleHub, controls: Controls, audit, *, host: str, port: int,
                 token: str | None, loopback: bool, header_timeout_s: float = 10.0,
                 max_connections: int = 128) -> None:
        self.hub = hub
        self.controls = controls
        self.audit = audit
        self.host = host
        self.port = port
        # a blank token is no token: it must never count as one, nor switch the loopback Host check off
        self.token = (token or "").strip() or None
        self.loopback = loopback
        if self.token is None and not loopback:
            raise ValueError(f"the console on {host} is not on loopback and needs a token")
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        self.refusals = RefusalLedger(audit)
        self.listener: ConsoleListener | None = None
        self._runner: web.AppRunner | None = None
        self._log_filter = BadRequestLogFilter()
        self._ticker: asyncio.Task | None = None

    # -- life ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind and serve (OSError when the address cannot be bound)."""
        app = web.Application(middlewares=[self._guard], client_max_size=64 * 1024)
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._asset)
        app.router.add_get("/events", self._events)
        app.router.add_post("/api/{action}", self._control)
        # keepalive_timeout runs from the moment a connection opens until a whole request has come (and again after
        # each answer): it is the header read timeout, so a half-sent header cannot hold a connection
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0,
                                     keepalive_timeout=self.header_timeout_s)
        await self._runner.setup()
        self.listener = ConsoleListener(cast(web.Server, self._runner.server), host=self.host, port=self.port,
                                        max_connections=self.max_connections)
        try:
            await self.listener.start()
        except OSError:
            self.listener = None
            await self._runner.cleanup()
            raise
        self.port = self.listener.port
        logging.getLogger("aiohttp.server").addFilter(self._log_filter)
        self._ticker = asyncio.create_task(self._tick(), name="console:refusal-summaries")

    async def aclose(self) -> None:
        self.hub.close_all(_CLOSED)  # ends each open stream at once
        if self._ticker is not None:
            self._ticker.cancel()
            try:
                await self._ticker
            except asyncio.CancelledError:
                pass
            self._ticker = None
        if self.listener is not None:
            await self.listener.aclose()
            self.listener = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self.refusals.flush()
            self._log_filter.flush(log, final=True)
            logging.getLogger("aiohttp.server").removeFilter(self._log_filter)

    async def _tick(self) -> None:
        """Write the summaries of ended windows even when no further refusal comes to trigger them."""
        while True:
            await asyncio.sleep(TICK_S)
            self.refusals.tick()
            self._log_filter.flush(log)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    # -- who may ask ---------------------------------------------------------------------------------

    def _host_ok(self, request: web.Request) -> bool:
        if not self.loopback or self.token is not None:
            return True
        host = request.headers.get("Host", "")
        return host in {f"127.0.0.1:{self.port}", f"localhost:{self.port}", f"[::1]:{self.port}",
                        f"{self.host}:{self.port}"}

    def _token_ok(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.cookies.get(COOKIE) or ""
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = auth[len("Bearer "):]
        return hmac.compare_digest(given.encode(), self.token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        peer = request.remote or ""
        if not self._host_ok(request):
            return self._refuse(request, peer, 403, "host not allowed")
        if self.token is not None and request.method == "GET" and request.path == "/" and "token" in request.query:
            if hmac.compare_digest(request.query["token"].encode(), self.token.encode()):
                self._trust(request)
                response = web.HTTPFound("/")
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", path="/")
                return response
            return self._refuse(request, peer, 401, "wrong token")
        if not self._token_ok(request):
            return self._refuse(request, peer, 401, "token required: open the console at /?token=…")
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if origin is not None and origin != f"{request.scheme}://{request.host}":
                return self._refuse(request, peer, 403, "cross-origin control refused")
            if request.content_type != "application/json":
                return self._refuse(request, peer, 415, "controls take a JSON body")
        self._trust(request)
        return await handler(request)

    def _trust(self, request: web.Request) -> None:
        if self.listener is not None:
            self.listener.note_request(request.transport, trusted=True)

    def _refuse(self, request: web.Request, peer: str, status: int, reason: str) -> web.Response:
        if self.listener is not None:
            self.listener.note_request(request.transport, trusted=False)
        if request.method == "POST" or status == 401:
            self.refusals.refused(peer=peer, reason=reason, path=request.path[:MAX_AUDITED_PATH],
                                  method=request.method)
        return web.Response(status=status, text=reason + "\n")

    # -- pages ---------------------------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.Response:
        return _asset_response("index.html")

    async def _asset(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _ASSETS or name == "index.html":
            raise web.HTTPNotFound()
        return _asset_response(name)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: one JSON message per event, a comment every 15 s so proxies keep it open."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        client = self.hub.subscribe(peer=request.remote or "")
        try:
            while True:
                try:
                    async with asyncio.timeout(KEEPALIVE_S):  # no task per message, unlike wait_for
                        message = await client.queue.get()
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                if message is _CLOSED:
                    break
                dropped = client.take_dropped()
                if dropped:
                    await response.write(_sse({"type": "gap", "dropped": dropped}))
                await response.write(_sse(message))
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the page went away, or the server is closing
        finally:
            self.hub.unsubscribe(client)
        return response

    async def _control(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        peer = request.remote or ""
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._refuse(request, peer, 400, "the body must be a JSON object")
        try:
            outcome = await self.controls.run(action, body)
        except ControlError as exc:
            self.audit.record(AuditKind.CONSOLE_CONTROL, action=action, arguments=body, peer=peer, status="refused",
                              error=str(exc))
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        self.audit.record(AuditKind.CONSOLE_CONTROL, action=action, arguments=body, peer=peer,
                          status="ok" if outcome.get("ok") else "failed", outcome=outcome)
        if action in ("mode", "events"):
            self.hub.update_status(overrides={k: v for k, v in outcome.items() if k != "ok"})
        return web.json_response(outcome)


def _sse(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n\n"


def _asset_response(name: str) -> web.Response:
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=_ASSETS[name], charset="utf-8",
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff",
                                 "Content-Security-Policy": "default-src 'self'; connect-src 'self'"})
