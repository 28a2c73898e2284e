"""A reminder request whose model call fails (an endpoint that does not answer) is still made by the resolver and
said back through the offline gate, in both invocation modes, instead of the offline line."""

from __future__ import annotations

import socket
from zoneinfo import ZoneInfo

import pytest

from .conftest import MODES

FAST = {"read_timeout_s": 1.0, "first_token_timeout_s": 1.0}


@pytest.mark.parametrize("mode", MODES)
async def test_an_unreachable_endpoint_still_makes_the_reminder(mode, make_harness):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    h = make_harness(mode=mode, base_url=f"http://127.0.0.1:{port}/v1", **FAST)
    turn = await h.turn("remind me tomorrow morning to brush my teeth")
    assert turn.metrics["fault"] == "connect" and turn.metrics["path"] == "gate"
    spoken = " ".join(turn.speech())
    assert spoken.startswith("OK, I'll remind you to brush your teeth on ") and spoken.endswith(" at 8:00 AM.")
    assert h.runtime.settings.agent.offline_line not in spoken
    [entry] = await h.calendar.list()
    local = entry.start_at.astimezone(ZoneInfo(entry.timezone))
    assert entry.title == "brush my teeth" and (local.hour, local.minute) == (8, 0)
