"""HostEventRouter wiring that a mutation run showed no test guarded (issue 26 §2)."""

from __future__ import annotations

import pytest

from toy_runtime.host.envelope import ActorRef, Binding, EventSource, HostEvent, HostEventRouter, NoBinding


async def _runner(event: HostEvent, binding: Binding) -> str:
    return binding.binding_id


def _router() -> HostEventRouter:
    router = HostEventRouter()
    router.add_runner("command", _runner)
    # Same event type, two sources: only the source filter tells these bindings apart.
    router.bind(Binding(binding_id="remote", event_types=("api.invoked",), runner="command",
                        source_kinds=("remote_api",), actor_kinds=("app",)))
    router.bind(Binding(binding_id="firmware", event_types=("api.invoked",), runner="command",
                        source_kinds=("firmware",)))
    return router


def _event(source: str, actor: ActorRef | None = None) -> HostEvent:
    return HostEvent(event_type="api.invoked", source=EventSource(kind=source), actor=actor)  # type: ignore[arg-type]


async def test_a_binding_only_routes_events_from_its_own_sources():
    """Guards the source filter in HostEventRouter.resolve (`binding.source_kinds`): without it the first binding
    for the type wins whatever the source, so a firmware event is judged by the remote binding's actor rule and
    a console event reaches a runner bound to MQTT sources only."""
    router = _router()
    assert await router.dispatch(_event("firmware")) == "firmware"
    assert await router.dispatch(_event("remote_api", ActorRef(kind="app", id="a1"))) == "remote"
    with pytest.raises(NoBinding, match="no binding for api.invoked from console"):
        router.resolve(_event("console", ActorRef(kind="app", id="a1")))
