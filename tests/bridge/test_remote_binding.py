"""The remote binding checks who sent a command, and its runner honours the envelope's delivery context: a result
is published on MQTT only when the envelope's surface is "mqtt".

The runtime's real router, kernel and plugins with the firmware's bindings (`bind_firmware`); the MQTT publish is
the runner's reply channel, collected here (the link itself is tested over a real broker in test_runtime_link.py).
"""

from __future__ import annotations

from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings, with_updates
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.host.envelope import (ActorRef, AgentInput, DeliveryContext, EventSource, EventType, HostEvent)
from toy_runtime.host.firmware_events import bind_firmware, dispatch_audited


def _runtime(tmp_path):
    settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}),
                            mqtt={"remote_capabilities": ["device.volume.adjust"]})
    audit, mixer = MemoryAudit(), MemoryMixer(level=50)
    runtime = build_runtime(settings, audit=audit, mixer=mixer)
    published: list[tuple[str, dict]] = []

    async def publish_result(command_id: str, **fields) -> None:
        published.append((command_id, fields))

    bind_firmware(runtime.router, runtime.kernel, runtime.audit, runtime.clock, runtime.settings, publish_result)
    return runtime, audit, mixer, published


def _command(command_id: str, value: int, *, actor: ActorRef | None = ActorRef(kind="app", id="parent-phone"),
             surface: str = "mqtt") -> HostEvent:
    return HostEvent(event_id=f"cmd_{command_id}", event_type=EventType.API_INVOKED,
                     source=EventSource(kind="remote_api", name="toy1"), actor=actor,
                     input=AgentInput(data={"name": "device.volume.adjust", "command_id": command_id,
                                            "arguments": {"mode": "absolute", "value": value}}),
                     delivery=DeliveryContext(surface=surface))  # type: ignore[arg-type]


async def test_a_remote_command_from_another_actor_is_refused_and_audited(tmp_path):
    runtime, audit, mixer, published = _runtime(tmp_path)
    try:
        for i, actor in enumerate((ActorRef(kind="user", id="child"), ActorRef(kind="owner", id="console"), None)):
            await dispatch_audited(runtime.router, _command(f"c{i}", 90, actor=actor), audit)
        assert mixer.level == 50 and not audit.of("event.result") and not audit.of("remote.executed")
        reasons = [r["reason"] for r in audit.of("host.unrouted")]
        assert reasons == ["binding remote refuses api.invoked from user:child",
                           "binding remote refuses api.invoked from owner:console",
                           "binding remote refuses api.invoked from no actor"]
        # the companion app and the fleet are let through
        for i, actor in enumerate((ActorRef(kind="app"), ActorRef(kind="fleet", id="ops"))):
            await dispatch_audited(runtime.router, _command(f"ok{i}", 60 + i, actor=actor), audit)
        assert mixer.level == 61 and [(cid, f["status"]) for cid, f in published] == [("ok0", "ok"), ("ok1", "ok")]
    finally:
        await runtime.aclose()


async def test_the_result_goes_only_to_the_envelopes_delivery_surface(tmp_path):
    runtime, audit, mixer, published = _runtime(tmp_path)
    try:
        await runtime.router.dispatch(_command("quiet", 30, surface="none"))
        assert mixer.level == 30  # it ran ...
        assert published == []  # ... and, asked for no reply, nothing was published
        assert [r["surface"] for r in audit.of("remote.executed")] == ["none"]
        await runtime.router.dispatch(_command("loud", 35, surface="mqtt"))
        assert mixer.level == 35 and [(cid, f["status"]) for cid, f in published] == [("loud", "ok")]
    finally:
        await runtime.aclose()


async def test_a_console_envelope_never_reaches_the_remote_binding(tmp_path):
    """The remote binding takes only the firmware link's source: a console envelope with an app actor is unrouted."""
    runtime, audit, mixer, published = _runtime(tmp_path)
    try:
        event = _command("x", 10).model_copy(update={"source": EventSource(kind="console")})
        await dispatch_audited(runtime.router, event, audit)
        assert mixer.level == 50 and published == []
        assert audit.of("host.unrouted")[0]["reason"] == "no binding for api.invoked from console"
    finally:
        await runtime.aclose()


async def test_a_refused_actor_hears_refused_not_silence(tmp_path):
    """The sender's app waits for a result: a command the binding refuses for its actor is answered "refused" on
    MQTT (nothing runs), and a runner that breaks answers "failed"."""
    runtime, audit, mixer, published = _runtime(tmp_path)

    async def publish_result(command_id: str, **fields) -> None:
        published.append((command_id, fields))

    try:
        await dispatch_audited(runtime.router, _command("kid", 90, actor=ActorRef(kind="user", id="child")), audit,
                               publish_result)
        await dispatch_audited(runtime.router, _command("quiet", 90, actor=ActorRef(kind="user"), surface="none"),
                               audit, publish_result)  # asked for no reply: none
        assert mixer.level == 50
        [(command_id, fields)] = published
        assert command_id == "kid" and fields["status"] == "refused" and fields["error_code"] == "actor_not_allowed"
        assert "user:child" in fields["error_message"]

        async def broken(event, binding):
            raise RuntimeError("runner bug")

        runtime.router.add_runner("remote_commands", broken)
        await dispatch_audited(runtime.router, _command("bug", 20), audit, publish_result)
        assert published[-1] == ("bug", {"status": "failed", "error_code": "internal_error",
                                         "error_message": "RuntimeError"})
    finally:
        await runtime.aclose()
