"""The live transcript of `run` and `ptt` on a terminal (LiveKit's console mode is the model).

    you: what is the weather today
    toy: It is sunny and warm today.
      event add_schedule: succeeded
      turn 1: 820 ms voice to voice (end of speech 310 ms, recognised 420 ms, first token 610 ms)
    [listening]                                   <- the status line, redrawn in place

It is fed, never polls: session states come from the SignalBus (a subscription served by one named task), the
heard utterance and the turn's items from `VoiceLoop(on_item=…)`, the latency line from `VoiceLoop(on_turn=…)`.

Only for a person at a terminal: `transcript_wanted` says no under systemd (JOURNAL_STREAM / INVOCATION_ID set) or
when stdout is not a TTY. There `log_turn` writes one structured line per turn to the log instead (journald), with
no words of the child in it (those stay in the audit log, which is not world-readable).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Mapping, TextIO

from ..audio.listener import Utterance
from ..session.items import EventOutcome, Speech
from ..signals import SessionState, SignalBus, StateSignal

__all__ = ["Transcript", "log_turn", "transcript_wanted"]

log = logging.getLogger("toy_runtime.turns")

TASK_NAME = "transcript-states"
_CLEAR = "\r\x1b[2K"  # carriage return + erase the line: the status line is redrawn in place
_STATUS = {
    SessionState.IDLE: "idle",
    SessionState.LISTENING: "listening",
    SessionState.THINKING: "thinking",
    SessionState.SPEAKING: "speaking",
    SessionState.CLOSED: "closed",
}


def transcript_wanted(stream: TextIO, environ: Mapping[str, str] = os.environ, flag: bool | None = None) -> bool:
    """True when a person is watching: `flag` if given (--transcript/--no-transcript), else a TTY outside systemd."""
    if flag is not None:
        return flag
    if environ.get("JOURNAL_STREAM") or environ.get("INVOCATION_ID"):
        return False  # systemd: stdout goes to the journal even when it looks like a terminal (StandardOutput=tty)
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def _latency(record: Any) -> str:
    w = record.waterfall_ms()
    total = w.get("first_audio")
    parts = [f"{label} {w[key]:.0f} ms" for key, label in
             (("endpoint", "end of speech"), ("asr_final", "recognised"), ("first_token", "first token"))
             if w.get(key) is not None]
    if parts and getattr(record, "turn_end", "fixed") != "fixed":
        parts[0] += f" ({record.turn_end})"  # the predicted end of turn: "end of speech 140 ms (complete)"
    head = f"{total:.0f} ms voice to voice" if total is not None else "nothing said"
    return head + (f" ({', '.join(parts)})" if parts else "")


def _outcome(item: EventOutcome) -> str:
    r = item.result
    detail = r.error or r.question or ""
    return f"  event {r.name}: {r.status.value}" + (f" ({detail})" if detail else "")


class _Above:
    """Other output to the same terminal (progress, log lines): the status line is cleared before it and redrawn
    after each complete line, so the two never end up on one line."""

    def __init__(self, view: "Transcript", inner: TextIO) -> None:
        self._view, self._inner = view, inner

    def write(self, text: str) -> int:
        self._view.clear_status()
        written = self._inner.write(text)
        self._inner.flush()
        if text.endswith("\n"):
            self._view.redraw_status()
        return written

    def flush(self) -> None:
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding… of the real stream
        return getattr(self._inner, name)


class Transcript:
    """What was heard and said, events with their outcome, per-turn latency, and the session state on one line."""

    def __init__(self, stream: TextIO, *, status_line: bool = True) -> None:
        self.stream = stream
        self.status_line = status_line  # False: states as plain lines (a non-terminal stream forced on)
        self.state: SessionState | None = None
        self._task: asyncio.Task[None] | None = None
        self._signals: SignalBus | None = None
        self._queue: asyncio.Queue | None = None
        self._guarded: list[tuple[logging.StreamHandler, Any]] = []

    def above(self, other: TextIO) -> TextIO:
        """`other` (e.g. stderr) wrapped so its lines appear above the status line, when both are on a terminal."""
        if not self.status_line or not transcript_wanted(other, {}):
            return other
        return _Above(self, other)  # type: ignore[return-value]

    def guard_logging(self) -> None:
        """Route the root logger's terminal handlers through `above` until `aclose`."""
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler.stream, _Above):
                wrapped = self.above(handler.stream)
                if wrapped is not handler.stream:
                    self._guarded.append((handler, handler.setStream(wrapped)))

    # -- feeding ----------------------------------------------------------------------------------------

    def attach(self, signals: SignalBus) -> asyncio.Task[None]:
        """Follow the session states on `signals` (a named task this transcript owns; ended by `aclose`)."""
        self._signals, self._queue = signals, signals.subscribe()
        self._task = asyncio.create_task(self._follow(self._queue), name=TASK_NAME)
        return self._task

    async def _follow(self, queue: asyncio.Queue) -> None:
        while True:
            signal = await queue.get()
            if isinstance(signal, StateSignal):
                self.show_state(signal.state)

    def item(self, item: object) -> None:
        """`VoiceLoop(on_item=…)`: the heard utterance, then what the turn says and does."""
        if isinstance(item, Utterance):
            self.line(f"you: {item.text.strip()}")
        elif isinstance(item, Speech):
            tag = "toy" if item.kind == "reply" else f"toy ({item.kind})"
            self.line(f"{tag}: {item.text}")
        elif isinstance(item, EventOutcome):
            self.line(_outcome(item))

    def turn(self, record: Any) -> None:
        """`VoiceLoop(on_turn=…)`: the turn's latency, once it has been said."""
        self.line(f"  turn {record.turn}: {_latency(record)}" + (" — interrupted" if record.interrupted else ""))

    # -- drawing ----------------------------------------------------------------------------------------

    def show_state(self, state: SessionState) -> None:
        """Redraw the status line (or, without one, print the state as a line)."""
        if state is self.state:
            return
        self.state = state
        if self.status_line:
            self._write(f"{_CLEAR}[{_STATUS[state]}]")
        else:
            self._write(f"[{_STATUS[state]}]\n")

    def clear_status(self) -> None:
        """Erase the status line (something else is about to write on the terminal)."""
        if self.status_line and self.state is not None:
            self._write(_CLEAR)

    def redraw_status(self) -> None:
        """Draw the status line again after something else wrote a line."""
        if self.status_line and self.state is not None:
            self._write(f"{_CLEAR}[{_STATUS[self.state]}]")

    def line(self, text: str) -> None:
        """A transcript line above the status line."""
        if self.status_line:
            status = f"[{_STATUS[self.state]}]" if self.state is not None else ""
            self._write(f"{_CLEAR}{text}\n{status}")
        else:
            self._write(text + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the toy keeps working without its view
            self.status_line = False

    async def aclose(self) -> None:
        """Stop following states and leave the cursor on a fresh line."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._signals is not None and self._queue is not None:
            self._signals.unsubscribe(self._queue)
        for handler, original in self._guarded:
            handler.setStream(original)
        self._guarded.clear()
        if self.status_line and self.state is not None:
            self._write(f"{_CLEAR}")


def log_turn(record: Any) -> None:
    """One structured log line per turn for journald: latency and event outcomes, never the child's words."""
    events = ",".join(f"{e['name']}={e['status']}" for e in record.events) or "-"
    failed = any(e["status"] in ("failed", "timed_out") for e in record.events)  # a device action did not run
    w = record.waterfall_ms()
    log.log(logging.WARNING if failed else logging.INFO,
            "turn=%d voice_to_voice_ms=%s first_token_ms=%s events=%s interrupted=%s terminated=%s",
            record.turn, w.get("first_audio"), w.get("first_token"), events, record.interrupted, record.terminated)
