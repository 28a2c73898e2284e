"""What a hostile page or neighbour may send the console once it is reachable: paths out of the asset folder,
bodies too big or of the wrong kind, cross-origin controls. A real aiohttp server on loopback, raw sockets, so the
bytes on the wire are exactly what an attacker would send (no client library normalises the path)."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("aiohttp")

TOKEN = "a-token-long-enough-for-tests"


class NoControls:
    """Controls that record what reached them: nothing may, for a refused request."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    async def run(self, action: str, body: dict) -> dict:
        self.calls.append((action, body))
        return {"ok": True}


async def _exchange(port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 10)
    rest = await asyncio.wait_for(reader.read(65536), 10)
    writer.close()
    return int(status_line.split()[1]), rest


@pytest.fixture
async def console():
    from toy_runtime.audit import MemoryAudit
    from toy_runtime.web.hub import ConsoleHub
    from toy_runtime.web.server import ConsoleServer

    controls = NoControls()
    server = ConsoleServer(ConsoleHub(), controls, MemoryAudit(), host="127.0.0.1", port=0, token=TOKEN,
                           loopback=True)
    await server.start()
    try:
        yield server, controls
    finally:
        await server.aclose()


def _get(port: int, path: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Connection: close\r\n\r\n").encode()


def _post(port: int, path: str, body: bytes, content_type: str = "application/json", origin: str | None = None
          ) -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n")
    if origin is not None:
        head += f"Origin: {origin}\r\n"
    return head.encode() + b"\r\n" + body


@pytest.mark.parametrize("path", ["/static/../server.py", "/static/..%2fserver.py", "/static/%2e%2e/server.py",
                                  "/static/....//server.py", "/static/%2e%2e%2f%2e%2e%2fconfig.py",
                                  "/static/index.html/../../server.py", "/static/app.js%00.py"])
async def test_no_path_leaves_the_asset_list(console, path):
    """Only the three named assets are ever served: no path, encoded or not, reaches a file beside them."""
    server, _ = console
    status, body = await _exchange(server.port, _get(server.port, path))
    assert status in (400, 403, 404), (path, status)
    assert b"import" not in body and b"ConsoleServer" not in body


async def test_the_assets_themselves_are_served(console):
    server, _ = console
    status, body = await _exchange(server.port, _get(server.port, "/static/app.js"))
    assert status == 200 and b"textContent" in body


async def test_a_body_over_the_limit_is_413_and_never_reaches_a_control(console):
    server, controls = console
    body = json.dumps({"text": "x" * 100_000}).encode()
    status, _ = await _exchange(server.port, _post(server.port, "/api/message", body))
    assert status == 413
    assert controls.calls == []


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data"])
async def test_a_control_that_is_not_json_is_415(console, content_type):
    """A form on another site can post these kinds without a preflight: none of them is a control."""
    server, controls = console
    status, _ = await _exchange(server.port, _post(server.port, "/api/end", b"{}", content_type))
    assert status == 415
    assert controls.calls == []


async def test_a_control_from_another_origin_is_403(console):
    server, controls = console
    status, _ = await _exchange(server.port, _post(server.port, "/api/end", b"{}", origin="http://evil.example"))
    assert status == 403
    assert controls.calls == []


async def test_a_control_from_the_page_itself_reaches_the_controls(console):
    """The refusals above are not a server that refuses everything."""
    server, controls = console
    status, _ = await _exchange(server.port, _post(server.port, "/api/end", b"{}",
                                                   origin=f"http://127.0.0.1:{server.port}"))
    assert status == 200
    assert controls.calls == [("end", {})]


async def test_every_page_forbids_inline_script(console):
    """The page's own defence against markup in what it shows: a CSP without 'unsafe-inline', no sniffing."""
    server, _ = console
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(_get(server.port, "/"))
    await writer.drain()
    head = (await asyncio.wait_for(reader.read(65536), 10)).split(b"\r\n\r\n")[0].decode().lower()
    writer.close()
    assert "content-security-policy: default-src 'self'" in head and "unsafe-inline" not in head
    assert "x-content-type-options: nosniff" in head
