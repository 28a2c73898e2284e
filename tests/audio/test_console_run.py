"""`toy-runtime run --web` on the virtual sound card, watched by a headless chromium: the mic level moves, a
spoken turn arrives live with its waterfall, and "End the session" closes the audio session."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toy_runtime.testing.browser import HeadlessChromium, find_chromium
from toy_runtime.testing.services import audit_records, unavailable, wait_for

from ..web.conftest import free_port
from ..web.test_console_browser import turn_with
from .test_run_startup import run_env

pytestmark = pytest.mark.audio


async def test_run_shows_the_mic_level_and_a_spoken_turn_live(sound_card, speak, tmp_path):
    if find_chromium() is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("aiohttp")
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    env = run_env(sound_card, tmp_path, TOY_SESSION__IDLE_TIMEOUT_S="60")
    proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run", "--web", f"127.0.0.1:{port}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: audit_records(audit, "runtime.warm"), 90, "everything loaded", proc)
        async with HeadlessChromium.launch(tmp_path / "profile") as browser:
            await browser.navigate(f"http://127.0.0.1:{port}/")
            await browser.wait_for("document.body.dataset.connected === 'true' && "
                                   "document.getElementById('state').textContent === 'idle'")
            # the real microphone's level reaches the page while it is open
            await browser.wait_for("document.getElementById('level-text').textContent.endsWith('dBFS')")
            # and what the front end does to it
            await browser.wait_for("document.getElementById('ears').textContent.includes('WebRTC AEC3') && "
                                   "document.getElementById('ears').textContent.includes('barge-in on')")
            utterance = speak("set the volume to thirty")
            sound_card.play_to_mic(utterance.pcm, utterance.sample_rate_hz, pad_ms=100)
            # whatever the recognizer made of it (a busy machine may mishear), the turn and its waterfall arrive
            await browser.wait_for(f"({turn_with('heard:')})?.stages.includes('first_audio')", timeout_s=60)
            turn = await browser.evaluate(turn_with("heard:"))
            assert turn["speech"]
            assert {"endpoint", "asr_final", "first_audio"} <= set(turn["stages"])
            assert await browser.evaluate("document.getElementById('state').textContent") == "listening"
            await browser.evaluate("document.getElementById('end-button').click()")
            await browser.wait_for("document.getElementById('state').textContent === 'idle'")
        closed = wait_for(lambda: audit_records(audit, "voice.session_closed"), 10, "the closed session", proc)
        assert closed[0]["reason"] == "closed"
        assert [r["action"] for r in audit_records(audit, "console.control")] == ["end"]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


async def test_ptt_serves_the_console_too(sound_card, tmp_path):
    if find_chromium() is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("aiohttp")
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "ptt", "--web", f"127.0.0.1:{port}"],
                            env=run_env(sound_card, tmp_path), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: audit_records(audit, "console.started"), 90, "the console", proc)
        async with HeadlessChromium.launch(tmp_path / "profile") as browser:
            await browser.navigate(f"http://127.0.0.1:{port}/")
            await browser.wait_for("document.body.dataset.connected === 'true' && "
                                   "document.getElementById('command').textContent === 'ptt'")
            proc.stdin.write("\n")  # Enter: the session opens and the page shows it
            proc.stdin.flush()
            await browser.wait_for("document.getElementById('state').textContent === 'listening'")
        _, err = proc.communicate(timeout=60)  # closes stdin (Ctrl-D): ptt ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
