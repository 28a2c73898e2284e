"""Issue 34 §1: the console never opens without a real token. An empty, blank or short `TOY_WEB__TOKEN` off
loopback stops every command with one line and exit 2 (and `config check` and `doctor` say it); on loopback a blank
token is no token, so the Host check still holds."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from tests.cli.helpers import clean_env, one_line_error, run_cli

from .conftest import runtime_env, start

pytest.importorskip("aiohttp")

MAKE = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"


@pytest.mark.parametrize("token", ["", "   ", "\t"])
def test_an_empty_or_blank_token_off_loopback_stops_run_with_one_line(tmp_path, token):
    proc = start(["run", "--web", "0.0.0.0:8088"], runtime_env(tmp_path, TOY_WEB__TOKEN=token),
                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("toy-runtime: web.token: required to serve the console on 0.0.0.0:8088, which is not "
                          "a loopback address (set TOY_WEB__TOKEN; an empty one is no token)"), err
    assert MAKE in err
    assert out == ""


def test_a_short_token_off_loopback_is_refused_by_chat_and_config_check(tmp_path):
    env = clean_env(tmp_path, TOY_WEB__TOKEN="fifteen-chars15")
    for args in (["chat", "--web", "0.0.0.0:8088"], ["config", "check", "--web", "[::]:8088"]):
        line = one_line_error(run_cli(*args, env=env, timeout=60))
        assert line.startswith("web.token: too short (15 characters) to guard the console on "), line
        assert "use at least 16" in line and MAKE in line and "fifteen-chars15" not in line


def test_config_check_and_doctor_refuse_an_empty_token_off_loopback(tmp_path):
    env = clean_env(tmp_path, TOY_WEB__TOKEN="", TOY_WEB__LISTEN="0.0.0.0:8088")
    line = one_line_error(run_cli("config", "check", env=env, timeout=60))
    assert line.startswith("web.token: required to serve the console on 0.0.0.0:8088"), line
    doctor = run_cli("doctor", env=env, timeout=60)
    assert doctor.returncode == 1
    config_line = next(l for l in doctor.stdout.splitlines() if l.split()[1:2] == ["config"])
    assert config_line.startswith("FAIL") and "web.token: required" in config_line and MAKE in config_line


def test_a_long_enough_token_off_loopback_passes_config_check(tmp_path):
    proc = run_cli("config", "check", "--web", "0.0.0.0:8088",
                   env=clean_env(tmp_path, TOY_WEB__TOKEN="sixteen-chars-16"), timeout=60)
    assert proc.returncode == 0, proc.stderr


async def _raw_get(port: int, request: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request.encode())
    await writer.drain()
    status = (await asyncio.wait_for(reader.readline(), 10)).decode()
    writer.close()
    return status


@pytest.mark.parametrize("token", ["", "  "])
async def test_on_loopback_a_blank_token_keeps_the_host_check(token):
    from toy_runtime.audit import MemoryAudit
    from toy_runtime.web.hub import ConsoleHub
    from toy_runtime.web.server import ConsoleServer

    server = ConsoleServer(ConsoleHub(), None, MemoryAudit(), host="127.0.0.1", port=0, token=token, loopback=True)
    await server.start()
    try:
        assert server.token is None
        evil = await _raw_get(server.port, "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        assert evil.startswith("HTTP/1.1 403"), evil
        end = await _raw_get(server.port, "POST /api/end HTTP/1.1\r\nHost: evil.example\r\n"
                                          "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        assert end.startswith("HTTP/1.1 403"), end
        own = await _raw_get(server.port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n")
        assert own.startswith("HTTP/1.1 200"), own
    finally:
        await server.aclose()


def test_a_server_off_loopback_without_a_token_cannot_be_made():
    from toy_runtime.audit import MemoryAudit
    from toy_runtime.web.hub import ConsoleHub
    from toy_runtime.web.server import ConsoleServer

    with pytest.raises(ValueError, match="needs a token"):
        ConsoleServer(ConsoleHub(), None, MemoryAudit(), host="0.0.0.0", port=0, token=" ", loopback=False)
