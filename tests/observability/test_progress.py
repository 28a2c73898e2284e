"""LoadingProgress: plain lines off a terminal, an in-place spinner on one, failures and cancellation reported."""

from __future__ import annotations

import asyncio
import io
import re
import time

import pytest

from toy_runtime.metrics.progress import LoadingProgress, format_ms


class FakeTty(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def spinner_tasks() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "progress:spinner" and not t.done()]


async def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = LoadingProgress(out)
    async with progress.step("ASR model"):
        await asyncio.to_thread(time.sleep, 0.05)
    value = await progress.run("TTS voice", lambda x: x * 2, 21)
    assert value == 42
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"loading ASR model… done \d+ ms", lines[0])
    assert re.fullmatch(r"loading TTS voice… done \d+ ms", lines[1])
    assert "\r" not in out.getvalue() and "\033" not in out.getvalue()  # journald gets clean lines
    assert set(progress.timings) == {"ASR model", "TTS voice"} and progress.timings["ASR model"] >= 40


async def test_a_failed_step_says_why_and_the_error_passes_through() -> None:
    out = io.StringIO()
    progress = LoadingProgress(out)
    with pytest.raises(FileNotFoundError):
        async with progress.step("TTS voice"):
            raise FileNotFoundError("piper voice not found: /x.onnx")
    assert re.fullmatch(r"loading TTS voice… failed after \d+ ms: piper voice not found: /x.onnx\n", out.getvalue())
    assert "TTS voice" in progress.timings


async def test_cancellation_is_reported_and_propagates() -> None:
    out = io.StringIO()
    progress = LoadingProgress(out, tty=True, interval_s=0.01)

    async def load() -> None:
        async with progress.step("ASR model"):
            await asyncio.sleep(10)

    task = asyncio.create_task(load(), name="test:load")
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "loading ASR model… cancelled after" in out.getvalue()
    assert spinner_tasks() == []


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_spinner_on_a_terminal_names_concurrent_steps_and_stops() -> None:
    out = FakeTty()
    progress = LoadingProgress(out, interval_s=0.01)
    assert progress.tty

    async def load(label: str, seconds: float) -> None:
        async with progress.step(label):
            await asyncio.to_thread(time.sleep, seconds)

    await asyncio.gather(load("ASR model", 0.15), load("TTS voice", 0.3))
    text = out.getvalue()
    assert "\r\033[K" in text
    # both named while both load
    assert re.search(r"loading ASR model, TTS voice… [⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ", text)
    finished = [line.split("\r\033[K")[-1] for line in text.split("\n") if "done" in line]
    assert [re.sub(r"\d+ ms", "N ms", f) for f in finished] == ["loading ASR model… done N ms",
                                                                 "loading TTS voice… done N ms"]
    assert text.endswith("\n")  # the spinner line was replaced by the last finished line
    assert spinner_tasks() == []


def test_format_ms() -> None:
    assert format_ms(820.4) == "820 ms"
    assert format_ms(1340) == "1.3 s"
    assert format_ms(75_000) == "75 s"
