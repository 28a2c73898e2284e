"""The console's volume and end take the one door every non-voice source takes: an `api.invoked` envelope from the
console's owner, dispatched through the runtime's router, where the "console" binding grants what it may do.

A real runtime (real kernel and plugins; the in-memory mixer) and the real console server on loopback, asked over HTTP.
"""

from __future__ import annotations

import asyncio
import io

import pytest

from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings, with_updates
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.host.envelope import ActorRef, ActorRefused, AgentInput, EventSource, EventType, HostEvent

from .conftest import free_port

aiohttp = pytest.importorskip("aiohttp")

from toy_runtime.web.console import WebConsole  # noqa: E402 - needs aiohttp
from toy_runtime.web.controls import END_SESSION, bind_console  # noqa: E402


class Rig:
    """A runtime with its console served on a free loopback port."""

    def __init__(self, tmp_path) -> None:
        port = free_port()
        self.settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}),
                                     web={"listen": f"127.0.0.1:{port}"})
        self.base = f"http://127.0.0.1:{port}"
        self.audit, self.mixer = MemoryAudit(), MemoryMixer(level=50)
        self.runtime = build_runtime(self.settings, audit=self.audit, mixer=self.mixer)
        self.console = WebConsole(self.settings, "chat")
        self.console.attach(self.runtime)
        self.ended = asyncio.Event()

    async def start(self) -> None:
        await self.console.start(end_session=self.ended.set, stream=io.StringIO())

    async def post(self, action: str, body: dict) -> tuple[int, dict]:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{self.base}/api/{action}", json=body) as response:
                return response.status, await response.json()

    async def aclose(self) -> None:
        await self.console.aclose()
        await self.runtime.aclose()


@pytest.fixture
async def rig(tmp_path):
    rig = Rig(tmp_path)
    try:
        yield rig
    finally:
        await rig.aclose()


async def test_a_console_volume_change_is_a_routed_host_event(rig):
    await rig.start()
    status, answer = await rig.post("volume", {"level": 40})
    assert status == 200 and answer["ok"] is True and answer["status"] == "succeeded"
    assert rig.mixer.level == 40
    [command] = rig.audit.of("console.command")
    assert command["event_type"] == "api.invoked" and command["source"] == "console"
    assert command["actor"] == {"kind": "owner", "id": "console"} and command["binding"] == "console"
    assert (command["name"], command["status"], command["surface"]) == ("device.volume.adjust", "succeeded",
                                                                          "console")
    # the kernel ran the envelope's event: its result carries the host event id
    [result] = [r for r in rig.audit.of("event.result") if r["turn_id"].startswith("console.")]
    assert result["event_id"] == command["host_event_id"] and result["arguments"] == {"mode": "absolute",
                                                                                    "value": 40}

    status, answer = await rig.post("end", {})
    assert status == 200 and rig.ended.is_set()
    ended = [r for r in rig.audit.of("console.command") if r["name"] == END_SESSION]
    assert ended and ended[0]["binding"] == "console" and ended[0]["actor"]["kind"] == "owner"


async def test_a_volume_the_binding_does_not_grant_is_refused(rig):
    # an owner who granted the console only the end of the session: the binding, not the page, decides
    bind_console(rig.runtime.router, rig.runtime, end_session=rig.ended.set, capabilities=frozenset({END_SESSION}))
    await rig.start()
    status, answer = await rig.post("volume", {"level": 90})
    assert status == 400 and answer["ok"] is False
    assert "device.volume.adjust is not granted to console" in answer["error"]
    assert rig.mixer.level == 50 and not rig.audit.of("event.result")
    [refused] = rig.audit.of("console.command_refused")
    assert refused["name"] == "device.volume.adjust" and refused["binding"] == "console"
    assert refused["actor"] == {"kind": "owner", "id": "console"}
    [control] = rig.audit.of("console.control")
    assert control["action"] == "volume" and control["status"] == "refused"


async def test_an_envelope_from_another_actor_is_refused_by_the_console_binding(rig):
    await rig.start()
    # the same command from the console source, but caused by someone other than its owner (e.g. the child)
    for actor in (ActorRef(kind="user"), ActorRef(kind="owner", id="someone-else"), None):
        event = HostEvent(event_type=EventType.API_INVOKED, source=EventSource(kind="console"), actor=actor,
                          input=AgentInput(data={"name": "device.volume.adjust",
                                                 "arguments": {"mode": "absolute", "value": 5}}))
        with pytest.raises(ActorRefused, match="binding console refuses api.invoked"):
            await rig.runtime.router.dispatch(event)
    assert rig.mixer.level == 50 and not rig.audit.of("event.result") and not rig.audit.of("console.command")
