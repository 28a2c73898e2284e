"""A real headless browser for tests: Debian's `chromium`, driven over the DevTools protocol (CDP) with aiohttp's
WebSocket client — no chromedriver, no npm.

    async with HeadlessChromium.launch(tmp_path) as browser:
        await browser.navigate("http://127.0.0.1:8088/")
        state = await browser.wait_for("document.body.dataset.state === 'listening'")
        png = await browser.screenshot()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..errors import ToyError

__all__ = ["BrowserError", "HeadlessChromium", "find_chromium"]


class BrowserError(ToyError, RuntimeError):
    """The browser could not start, or a CDP command failed."""

    code = "browser_failed"


def find_chromium() -> str | None:
    """The chromium binary on PATH (Debian: `apt-get install chromium`), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class HeadlessChromium:
    """One headless chromium process with one page, spoken to over CDP."""

    def __init__(self, proc: subprocess.Popen, session, ws, profile: Path) -> None:
        self.proc = proc
        self._session = session
        self._ws = ws
        self._ids = itertools.count(1)
        self.profile = profile

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(cls, profile: Path, **kw):
        """`async with HeadlessChromium.launch(dir) as browser:` — a browser that is closed afterwards."""
        browser = await cls.start(profile, **kw)
        try:
            yield browser
        finally:
            await browser.close()

    @classmethod
    async def start(cls, profile: Path, *, width: int = 1280, height: int = 900,
                    timeout_s: float = 30.0) -> "HeadlessChromium":
        """Start chromium with an empty page and connect to it (close() ends it)."""
        import aiohttp

        binary = find_chromium()
        if binary is None:
            raise BrowserError("chromium is not installed (apt-get install chromium)")
        profile.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            port = await asyncio.wait_for(asyncio.to_thread(_devtools_port, proc), timeout_s)
            session = aiohttp.ClientSession()
            async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            page = next(t for t in targets if t.get("type") == "page")
            ws = await session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=64 * 1024 * 1024)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        browser = cls(proc, session, ws, profile)
        await browser.send("Page.enable")
        await browser.send("Runtime.enable")
        return browser

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One CDP command; its result (events that arrive meanwhile are skipped)."""
        message_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = await self._ws.receive()
            if message.type.name != "TEXT":
                raise BrowserError(f"the DevTools connection closed during {method}")
            data = json.loads(message.data)
            if data.get("id") == message_id:
                if "error" in data:
                    raise BrowserError(f"{method}: {data['error']}")
                return data.get("result", {})

    async def navigate(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 30.0, poll_s: float = 0.1) -> Any:
        """Evaluate until the expression is truthy; its value. AssertionError (with the page text) on timeout."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            try:
                value = await self.evaluate(expression)
            except BrowserError:
                value = None  # the page is still loading
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                text = await self.evaluate("document.body ? document.body.innerText : ''")
                raise AssertionError(f"timed out waiting for {expression}; the page shows:\n{text}")
            await asyncio.sleep(poll_s)

    async def screenshot(self) -> bytes:
        """The page as PNG."""
        result = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        return base64.b64decode(result["data"])

    async def close(self) -> None:
        try:
            await self._ws.close()
            await self._session.close()
        finally:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _devtools_port(proc: subprocess.Popen[str]) -> int:
    """The port chromium prints as `DevTools listening on ws://127.0.0.1:PORT/…` (blocking read of stderr)."""
    stderr = proc.stderr
    assert stderr is not None  # started with stderr=PIPE
    for line in stderr:
        match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if match:
            # keep draining stderr so chromium never blocks on a full pipe
            import threading

            threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
            return int(match.group(1))
    raise BrowserError(f"chromium exited ({proc.wait()}) before its DevTools port was known")
