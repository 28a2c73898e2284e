"""With a firmware link configured, the page shows its state (a real mosquitto with a password), and the MQTT
password never reaches the page."""

from __future__ import annotations

import subprocess

import pytest

from toy_runtime.testing.broker import start_broker_for_test
from toy_runtime.testing.browser import HeadlessChromium
from toy_runtime.testing.services import audit_records, wait_for

from .conftest import free_port, runtime_env, start

pytestmark = [pytest.mark.broker, pytest.mark.usefixtures("chromium")]
PASSWORD = "mqtt-secret-pw-8812"


@pytest.fixture
def broker():
    b = start_broker_for_test(users={"toy": PASSWORD})
    try:
        yield b
    finally:
        b.close()


async def test_the_page_shows_the_mqtt_link_and_never_its_password(broker, tmp_path):
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    env = runtime_env(tmp_path, TOY_MQTT__USERNAME="toy", TOY_MQTT__PASSWORD=PASSWORD)
    proc = start(["chat", "--web", f"127.0.0.1:{port}", "--mqtt-url", broker.url, "--device-id", "toy7"], env,
                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: audit_records(audit, "console.started"), 60, "the console", proc)
        async with HeadlessChromium.launch(tmp_path / "profile") as browser:
            await browser.navigate(f"http://127.0.0.1:{port}/")
            await browser.wait_for("document.getElementById('mqtt').textContent === 'connected (toy7)'")
            proc.stdin.write("set the volume to 20\n")
            proc.stdin.flush()
            await browser.wait_for("document.getElementById('volume').dataset.level === '20'")
            page = await browser.evaluate("document.documentElement.outerHTML")
            seen = await browser.evaluate("fetch('/events').then(r => r.body.getReader().read())"
                                          ".then(c => new TextDecoder().decode(c.value))")
        assert "toy7" in page and '"status"' in seen
        assert PASSWORD not in page + seen and "toy" + ":" + PASSWORD not in seen
    finally:
        proc.kill()
        proc.communicate()
