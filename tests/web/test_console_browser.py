"""The debug console in a real headless chromium, served by a real `toy-runtime` process: turns arrive live, the
controls steer the runtime (volume through the kernel, audited; the mode of the next turn; the end of the session),
and the screenshot in docs/console.md is taken here (`TOY_CONSOLE_SCREENSHOT=docs/console.png`)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from toy_runtime.testing.browser import HeadlessChromium
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, wait_for

from .conftest import free_port, runtime_env, start

pytestmark = pytest.mark.usefixtures("chromium")


def turn_with(text: str) -> str:
    """JS: the turn card whose heard line contains `text`, as {heard, mode, speech[], events[], stages[]}."""
    return f"""(() => {{
      const card = [...document.querySelectorAll('.turn')].find(c => c.querySelector('.heard').textContent.includes({json.dumps(text)}));
      if (!card) return null;
      return {{
        heard: card.querySelector('.heard').textContent,
        mode: card.querySelector('.badge').textContent,
        speech: [...card.querySelectorAll('.speech')].map(s => [s.dataset.answer, s.dataset.kind, s.childNodes[1].textContent]),
        events: [...card.querySelectorAll('tr[data-status]')].map(r => [r.children[0].textContent, r.dataset.status]),
        stages: [...card.querySelectorAll('.wf-row')].map(r => r.dataset.stage),
        notes: [...card.querySelectorAll('.notes li')].map(n => n.textContent),
      }};
    }})()"""


def start_chat_console(tmp_path, llm: ScriptedLLMServer, port: int) -> subprocess.Popen:
    """`toy-runtime chat --web` on `port` against the scripted model, returned once its console serves."""
    env = runtime_env(tmp_path, TOY_LLM__BASE_URL=llm.url)
    proc = start(["chat", "--web", f"127.0.0.1:{port}"], env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE)
    try:
        wait_for(lambda: audit_records(tmp_path / "audit.jsonl", "console.started"), 60, "the console", proc)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc


async def test_chat_turns_arrive_live_and_the_controls_steer_the_runtime(tmp_path):
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    with ScriptedLLMServer(default=Reply(text="Hi! I am Pip, your toy friend.")) as llm:
        proc = start_chat_console(tmp_path, llm, port)
        try:
            async with HeadlessChromium.launch(tmp_path / "profile") as browser:
                await browser.navigate(f"http://127.0.0.1:{port}/")
                await browser.wait_for("document.body.dataset.connected === 'true' && "
                                       "document.body.dataset.state === 'listening'")
                assert await browser.evaluate("document.querySelectorAll('.turn').length") == 0

                # a turn typed on stdin appears in the open page: it came over the live stream
                proc.stdin.write("hello pip\n")
                proc.stdin.flush()
                await browser.wait_for(f"({turn_with('hello pip')})?.stages.length")
                turn = await browser.evaluate(turn_with("hello pip"))
                assert turn["mode"] == "dual_agent"
                # each spoken segment of answer 1, as the splitter cut it
                assert turn["speech"] == [["1", "reply", "Hi!"], ["1", "reply", "I am Pip, your toy friend."]]
                assert {"first_token", "first_speech", "total"} <= set(turn["stages"])

                # the volume control goes through the kernel like the child's request, and is audited
                await browser.evaluate("document.getElementById('volume-input').value = 70;"
                                       "document.getElementById('volume-form').requestSubmit()")
                await browser.wait_for("document.getElementById('volume').dataset.level === '70'")
                control = wait_for(lambda: audit_records(audit, "console.control"), 10, "the control record")
                assert control[0]["action"] == "volume" and control[0]["status"] == "ok"
                assert control[0]["peer"] == "127.0.0.1"
                results = [r for r in audit_records(audit, "event.result") if r["turn_id"].startswith("console.")]
                assert [(r["name"], r["status"], r["arguments"]) for r in results] == [
                    ("device.volume.adjust", "succeeded", {"mode": "absolute", "value": 70})]

                # the mode switch applies to the next turn, typed in the page this time
                await browser.evaluate("document.getElementById('mode-select').value = 'chat_agent_tools';"
                                       "document.getElementById('mode-form').requestSubmit()")
                await browser.wait_for("document.getElementById('mode').textContent === 'chat_agent_tools'")
                # the model's first token is held back: the page shows the turn while it runs, holding cue and all
                release = threading.Event()
                llm.add(Reply(text="Rainbows happen when sunlight shines through raindrops. Red is on the outside!",
                              delay_s=60, release=release))
                await browser.evaluate("document.getElementById('message-input').value = 'tell me more';"
                                       "document.getElementById('message-form').requestSubmit()")
                await browser.wait_for(f"({turn_with('tell me more')})?.speech.some(s => s[1] === 'holding')")
                assert await browser.evaluate("document.getElementById('state').textContent") in ("thinking",
                                                                                                 "speaking")
                if os.environ.get("TOY_CONSOLE_SCREENSHOT_CHAT"):
                    Path(os.environ["TOY_CONSOLE_SCREENSHOT_CHAT"]).write_bytes(await browser.screenshot())
                release.set()
                await browser.wait_for(f"({turn_with('tell me more')})?.stages.length")
                turn = await browser.evaluate(turn_with("tell me more"))
                assert turn["mode"] == "chat_agent_tools"
                assert [kind for _, kind, _ in turn["speech"]] == ["holding", "reply", "reply"]
                requests = llm.requests
                assert len(requests) == 2
                assert "tools" not in requests[0] and requests[1]["tools"]

                # a provider fault: the page shows the fault line the child heard and why
                llm.add(Reply(fault="http_500"))
                proc.stdin.write("what is a rainbow\n")
                proc.stdin.flush()
                await browser.wait_for(f"({turn_with('what is a rainbow')})?.stages.length")
                turn = await browser.evaluate(turn_with("what is a rainbow"))
                assert [kind for _, kind, _ in turn["speech"]] and {kind for _, kind, _ in turn["speech"]} <= {
                    "fault", "holding"}
                assert any(n.startswith("fault in the chat_agent call") for n in turn["notes"]), turn["notes"]

                # ending the session from the page ends `chat` like the end of its input
                await browser.evaluate("document.getElementById('end-button').click()")
                assert proc.wait(timeout=30) == 0
                await browser.wait_for("document.getElementById('state').textContent === 'closed' || "
                                       "document.body.dataset.connected === 'false'")
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    kinds = [r["action"] for r in audit_records(audit, "console.control")]
    assert kinds == ["volume", "mode", "message", "end"]


async def test_a_demo_shows_each_spoken_turn_with_its_waterfall(tmp_path):
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    env = runtime_env(tmp_path)
    proc = start(["demo", "--web", f"127.0.0.1:{port}", "--out", str(tmp_path / "out"),
                  "--say", "Set the volume to thirty.", "--say", "See you later."], env,
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: audit_records(audit, "console.started"), 120, "the console", proc)
        async with HeadlessChromium.launch(tmp_path / "profile") as browser:
            await browser.navigate(f"http://127.0.0.1:{port}/")
            await browser.wait_for(f"({turn_with('volume to 30')})?.stages.includes('first_audio')",
                                   timeout_s=120)
            turn = await browser.evaluate(turn_with("volume to 30"))
            assert ["device.volume.adjust", "succeeded"] in turn["events"]
            assert {"endpoint", "asr_final", "first_audio", "event:device.volume.adjust"} <= set(turn["stages"])
            assert any(kind == "gate" for _, kind, _ in turn["speech"])
            assert await browser.evaluate("document.getElementById('volume').dataset.level") == "30"
            if os.environ.get("TOY_CONSOLE_SCREENSHOT"):
                Path(os.environ["TOY_CONSOLE_SCREENSHOT"]).write_bytes(await browser.screenshot())
            png = await browser.screenshot()
            assert png.startswith(b"\x89PNG")
            # the farewell turn arrives while the page is open, and the session ends
            await browser.wait_for(f"({turn_with('you later')})?.speech.length", timeout_s=120)
            # the farewell is spoken before the terminal event finishes (it waits for its siblings and the line):
            # on a busy machine the page can show the turn while the event still says "running"
            await browser.wait_for(f"({turn_with('you later')})?.events.some("
                                   "e => e[0] === 'session.terminate' && e[1] !== 'running')", timeout_s=60)
            farewell = await browser.evaluate(turn_with("you later"))
            assert ["session.terminate", "succeeded"] in farewell["events"]
            out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "console: http://127.0.0.1:" in out


async def test_markup_in_what_the_child_said_is_shown_as_text_never_run(tmp_path):
    """Everything the runtime heard is untrusted: words that look like HTML reach the page as text. An element
    that ran would set `window.pwned`; none may be created inside the turn card."""
    port = free_port()
    said = "<img src=x onerror=\"window.pwned=1\"> hi <script>window.pwned=2</script>"
    with ScriptedLLMServer(default=Reply(text="Hello there.")) as llm:
        proc = start_chat_console(tmp_path, llm, port)
        try:
            async with HeadlessChromium.launch(tmp_path / "profile") as browser:
                await browser.navigate(f"http://127.0.0.1:{port}/")
                await browser.wait_for("document.body.dataset.connected === 'true'")
                proc.stdin.write(said + "\n")
                proc.stdin.flush()
                await browser.wait_for(f"({turn_with('onerror')})?.stages.length")
                turn = await browser.evaluate(turn_with("onerror"))
                assert said in turn["heard"]
                assert await browser.evaluate("document.querySelectorAll('.turn img, .turn script').length") == 0
                assert await browser.evaluate("window.pwned === undefined")
        finally:
            proc.kill()
            proc.communicate()
