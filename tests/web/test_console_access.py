"""Who may reach the console: a non-loopback bind needs a token (else one line, exit 2), a page on another site or
behind another Host name is refused, no secret reaches the page, and with the console off nothing of it loads."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from toy_runtime.testing.services import audit_records, wait_for

from .conftest import free_port, runtime_env, start

pytest.importorskip("aiohttp")


def test_a_non_loopback_bind_without_a_token_is_refused_with_one_line(tmp_path):
    for command in (["chat"], ["demo", "--out", str(tmp_path / "out")], ["run"], ["ptt"]):
        proc = start([*command, "--web", "0.0.0.0:8088"], runtime_env(tmp_path), stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (command, err)
        assert err.splitlines() == ["toy-runtime: web.token: required to serve the console on 0.0.0.0:8088, which "
                                    "is not a loopback address (set TOY_WEB__TOKEN; an empty one is no token), make "
                                    "one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"], err
        assert out == ""


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = start(["chat", "--web", f"127.0.0.1:{port}"], runtime_env(tmp_path), stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"toy-runtime: web.listen: cannot serve the console on "
                                                         f"127.0.0.1:{port}"), err


def _get(url: str, headers: dict | None = None, data: bytes | None = None):
    request = urllib.request.Request(url, headers=headers or {}, data=data, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


def _read_stream(url: str, headers: dict, until: str) -> str:
    """The event stream's text up to the first line containing `until`."""
    lines = []
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        for raw in response:
            lines.append(raw.decode())
            if until in lines[-1]:
                return "".join(lines)
    raise AssertionError("the stream ended early:\n" + "".join(lines))


def test_with_a_token_every_request_needs_it_and_no_secret_reaches_the_page(tmp_path):
    port = free_port()
    secrets = {"TOY_WEB__TOKEN": "console-token-123456", "OPENAI_API_KEY": "sk-verysecretkey0123456789",
               "TOY_MQTT__PASSWORD": "mqtt-password-4242"}
    audit = tmp_path / "audit.jsonl"
    proc = start(["chat", "--web", f"0.0.0.0:{port}"], runtime_env(tmp_path, **secrets), stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: audit_records(audit, "console.started"), 60, "the console", proc)
        base = f"http://127.0.0.1:{port}"
        assert _get(base + "/")[0] == 401
        assert _get(base + "/events")[0] == 401
        assert _get(base + "/?token=wrong")[0] == 401
        body = b'{"level": 10}'
        assert _get(base + "/api/volume", {"Content-Type": "application/json"}, body)[0] == 401
        bearer = {"Authorization": "Bearer " + secrets["TOY_WEB__TOKEN"]}
        status, page, _ = _get(base + "/", bearer)
        assert status == 200 and "toy-runtime" in page
        # a control from another site's page is refused even with the token, and audited
        status, _, _ = _get(base + "/api/volume", {**bearer, "Content-Type": "application/json",
                                                   "Origin": "http://evil.example"}, body)
        assert status == 403
        status, answer, _ = _get(base + "/api/volume", {**bearer, "Content-Type": "application/json"}, body)
        assert status == 200 and '"succeeded"' in answer
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        wait_for(lambda: audit_records(audit, "turn.completed"), 30, "the turn", proc)
        # everything a page can read: the stream (status snapshot and replayed turns) and the assets
        stream = _read_stream(base + "/events", bearer, until='"turn.completed"')
        assert '"type": "status"' in stream and "hello" in stream
        assets = "".join(_get(f"{base}/static/{name}", bearer)[1] for name in ("app.js", "style.css"))
        for name, secret in secrets.items():
            if name != "TOY_WEB__TOKEN":
                assert secret not in stream + page + assets
    finally:
        proc.kill()
        proc.communicate()
    refused = audit_records(audit, "console.refused")
    assert {r["reason"] for r in refused} >= {"cross-origin control refused", "wrong token"}
    assert [r["status"] for r in audit_records(audit, "console.control")] == ["ok"]


def test_with_the_console_off_nothing_of_it_is_imported(tmp_path):
    """`python -X importtime` lists every module a plain `chat` loads: no aiohttp, no toy_runtime.web."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "toy_runtime", "chat"], input="hello\n",
                          env=runtime_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "toy_runtime.session.turn" in modules  # the listing is real
    assert not {m for m in modules if m.startswith(("aiohttp", "toy_runtime.web"))}
