"""A loopback HTTP server that behaves like SearxNG's `/search?format=json`, with scriptable failure modes.

Real sockets, real HTTP: the adapter under test cannot tell it from an instance except by the answers it is told to
give. Modes:

- "results"        200 with the given results (default: a few SearxNG-like results with HTML in `content`)
- "empty"          200 with `results: []`
- "slow"           waits `delay_s`, then answers like "results"
- "http_500"       500 with an HTML error page
- "http_429"       429 (SearxNG's limiter)
- "http_403"       403 (json format not enabled on the instance)
- "malformed_json" 200, content-type JSON, body not JSON
- "wrong_shape"    200 with valid JSON whose `results` is not a list

Usage:
    with FakeSearxng(mode="results") as fake:
        SearxngSearch(fake.url) ...
        fake.request_count, fake.requests[-1]["q"]
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence
from urllib.parse import parse_qs, urlsplit

MODES = ("results", "empty", "slow", "http_500", "http_429", "http_403", "malformed_json", "wrong_shape")

DEFAULT_RESULTS: tuple[dict[str, Any], ...] = (
    {
        "url": "https://en.wikipedia.org/wiki/Giant_panda",
        "title": "Giant <b>panda</b> - Wikipedia",
        "content": "The giant <b>panda</b> (Ailuropoda melanoleuca) is a bear species endemic to China. "
        "It is characterised by its bold black-and-white coat &amp; rotund body. " + "More text. " * 40,
        "engine": "wikipedia",
        "engines": ["wikipedia", "duckduckgo"],
        "score": 3.0,
        "category": "general",
    },
    {
        "url": "https://www.worldwildlife.org/species/giant-panda",
        "title": "Giant Panda | Species | WWF",
        "content": "Pandas eat <em>bamboo</em> for up to 14 hours a day.",
        "engine": "duckduckgo",
        "engines": ["duckduckgo"],
        "score": 1.5,
        "category": "general",
    },
    {
        "url": "javascript:alert(1)",
        "title": "Not a web link",
        "content": "dropped by the adapter",
        "engine": "bing",
        "engines": ["bing"],
        "score": 1.2,
        "category": "general",
    },
    {
        "url": "https://nationalzoo.si.edu/animals/giant-panda",
        "title": "Giant panda | Smithsonian's National Zoo",
        "content": "Giant pandas live in temperate forests high in the mountains of southwest China.",
        "engine": "google",
        "engines": ["google"],
        "score": 1.0,
        "category": "general",
    },
)


class FakeSearxng:
    """SearxNG-like JSON search on 127.0.0.1 (free port), in a background thread."""

    def __init__(
        self,
        mode: str = "results",
        *,
        results: Sequence[Any] | None = None,
        delay_s: float = 2.0,
    ) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[dict[str, str]] = []  # query parameters of each /search request (first value each)
        self.set_mode(mode, results=results, delay_s=delay_s)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_mode(
        self, mode: str, *, results: Sequence[Any] | None = None, delay_s: float | None = None
    ) -> None:
        """Change what the next requests get. `results` items are sent as given (non-dicts too, to test robustness)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        with self._lock:
            self.mode = mode
            if results is not None:
                self.results = copy.deepcopy(list(results))
            elif not hasattr(self, "results"):
                self.results = copy.deepcopy(list(DEFAULT_RESULTS))
            if delay_s is not None:
                self.delay_s = delay_s

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def url(self) -> str:
        """Base URL of the instance (what goes into `[search] url`)."""
        if self._server is None:
            raise RuntimeError("FakeSearxng is not started")
        return f"http://127.0.0.1:{self._server.server_port}"  # bound there by start()

    def start(self) -> "FakeSearxng":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass  # keep test output clean

            def do_GET(self) -> None:  # noqa: N802 - stdlib naming
                fake._handle(self)

        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown() (and so each test's teardown) quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-searxng", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases handlers sleeping in "slow"
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeSearxng":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling (server threads) --------------------------------------------------------------------------

    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(req.path)
        if parts.path.rstrip("/") != "/search":
            self._send(req, 404, "text/plain", b"not found")
            return
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append(params)
            mode, results, delay_s = self.mode, list(self.results), self.delay_s
        if mode == "slow":
            if self._stopping.wait(delay_s):
                return
            mode = "results"
        if mode == "http_500":
            self._send(req, 500, "text/html", b"<html><body>Internal Server Error</body></html>")
        elif mode == "http_429":
            self._send(req, 429, "text/plain", b"Too Many Requests")
        elif mode == "http_403":
            self._send(req, 403, "text/html", b"<html><body>Forbidden</body></html>")
        elif mode == "malformed_json":
            self._send(req, 200, "application/json", b'{"query": "x", "results": [{"url": ')
        elif mode == "wrong_shape":
            self._send_json(req, {"query": params.get("q", ""), "results": {"url": "https://example.org"}})
        else:
            self._send_json(req, self._payload(params.get("q", ""), [] if mode == "empty" else results))

    @staticmethod
    def _payload(query: str, results: list[Any]) -> dict[str, Any]:
        return {
            "query": query,
            "number_of_results": len(results),
            "results": results,
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }

    def _send_json(self, req: BaseHTTPRequestHandler, body: Any) -> None:
        self._send(req, 200, "application/json", json.dumps(body).encode())

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, content_type: str, body: bytes) -> None:
        try:
            req.send_response(status)
            req.send_header("Content-Type", content_type)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            req.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests); nothing to answer
