"""A small progress display for slow start-up steps (model loading, opening devices).

    progress = LoadingProgress(sys.stderr)
    async with progress.step("ASR model"):
        recognizer = await asyncio.to_thread(build_recognizer, settings)
    synth = await progress.run("TTS voice", build_synthesizer, settings)   # the same, in one call

On a terminal a spinner line is redrawn in place ("loading ASR model, TTS voice… ⠙ 1.2 s") and every finished
step leaves one line; elsewhere (journald, a pipe, a log file) only the finished lines are written, with no
control characters:

    loading ASR model… done 820 ms
    loading TTS voice… failed after 1.3 s: piper voice not found: /x.onnx

Steps may run concurrently (`asyncio.gather`); the spinner then names all of them. The spinner is redrawn by a
task on the event loop, so the work itself must run off the loop (a worker thread), as model loading does anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any, AsyncIterator, Callable, TextIO, TypeVar

__all__ = ["LoadingProgress", "format_ms"]

T = TypeVar("T")

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_CLEAR = "\r\033[K"


def format_ms(ms: float) -> str:
    """820 ms / 1.3 s / 75 s: short and readable."""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 10_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 1000:.0f} s"


class LoadingProgress:
    """Prints one line per finished step to `stream`; on a TTY also an in-place spinner while steps run.

    `tty=None` asks `stream.isatty()`. `timings` keeps each finished step's duration in ms (for logs or the
    READY notification); a failed step is recorded too. `interval_s` is the spinner redraw period.
    """

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, interval_s: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self.interval_s = interval_s
        self.clock = clock
        self.timings: dict[str, float] = {}
        self._active: dict[str, float] = {}  # label → start time, in start order
        self._spinner: asyncio.Task | None = None
        self._frame = 0

    # -- public -------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def step(self, label: str) -> AsyncIterator[None]:
        """Show `label` as loading while the body runs; print `loading LABEL… done N ms` (or `failed …`) after.

        Exceptions (and cancellation) pass through unchanged after the line is written.
        """
        start = self.clock()
        self._active[label] = start
        self._ensure_spinner()
        outcome = "done"
        try:
            yield
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except BaseException as exc:
            outcome = f"failed: {_one_line(exc)}"
            raise
        finally:
            elapsed_ms = (self.clock() - start) * 1000
            self._active.pop(label, None)
            self.timings[label] = round(elapsed_ms, 1)
            if outcome == "done":
                line = f"loading {label}… done {format_ms(elapsed_ms)}"
            else:
                word, _, why = outcome.partition(": ")
                line = f"loading {label}… {word} after {format_ms(elapsed_ms)}" + (f": {why}" if why else "")
            self._print_line(line)
            if not self._active:
                await self._stop_spinner()

    async def run(self, label: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` in a worker thread, shown as one step."""
        async with self.step(label):
            return await asyncio.to_thread(fn, *args, **kwargs)

    # -- drawing ------------------------------------------------------------------------------------------

    def _print_line(self, line: str) -> None:
        prefix = _CLEAR if self.tty else ""
        self._write(prefix + line + "\n")
        if self.tty and self._active:
            self._draw()  # the remaining steps keep their spinner line below the finished one

    def _draw(self) -> None:
        if not self._active:
            return
        first = min(self._active.values())
        frame = _FRAMES[self._frame % len(_FRAMES)]
        self._frame += 1
        labels = ", ".join(self._active)
        self._write(f"{_CLEAR}loading {labels}… {frame} {format_ms((self.clock() - first) * 1000)}")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream must never break start-up
            pass

    def _ensure_spinner(self) -> None:
        if not self.tty or (self._spinner is not None and not self._spinner.done()):
            return
        self._draw()
        self._spinner = asyncio.get_running_loop().create_task(self._spin(), name="progress:spinner")

    async def _spin(self) -> None:
        while self._active:
            await asyncio.sleep(self.interval_s)
            self._draw()

    async def _stop_spinner(self) -> None:
        task, self._spinner = self._spinner, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)  # a cancellation of the caller still propagates


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
