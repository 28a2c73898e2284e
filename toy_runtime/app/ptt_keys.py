"""Push-to-talk from the keyboard: hold space to talk (where the terminal allows), Enter to start and stop.

A terminal sends no key-up. Held, a key repeats (after the typematic delay, 250–660 ms, then ~30 times a second),
so in cbreak mode "held" is "its repeats keep coming" and "released" is "no repeat for `release_ms`". A single
space with no repeat is a tap: it latches talking on, like Enter, and the next press turns it off.
`HoldToTalk` is that rule as a pure state machine over key times (no clock, no I/O), so it is tested exactly.

`key_presses` yields keys as they arrive: on a TTY each key in cbreak mode (read by the event loop, no thread;
the terminal's mode is restored afterwards), otherwise one "\\n" per input line (a pipe, a test). None = end of
input (Ctrl-D or EOF).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import AsyncGenerator, AsyncIterator, Awaitable, Callable, TextIO, cast

__all__ = ["HoldToTalk", "drive_push_to_talk", "key_presses", "keys_are_live"]

SPACE, ENTER, EOF_KEY = " ", "\n", "\x04"


class HoldToTalk:
    """Keys with their times → talk on/off. `key`/`expire` return the new talking state when it changes, else None.

    `repeat_window_s` is how long after a space another space still counts as its key-repeat (covers the longest
    usual typematic delay); `release_s` is the silence after the last repeat that means the key was let go.
    """

    def __init__(self, *, release_s: float = 0.25, repeat_window_s: float = 0.8) -> None:
        if not 0 < release_s <= repeat_window_s:
            raise ValueError("need 0 < release_s <= repeat_window_s")
        self.release_s = release_s
        self.repeat_window_s = repeat_window_s
        self.talking = False
        self._mode: str | None = None  # "pending" (a space, repeats not seen yet) | "hold" | "latched"
        self._last = 0.0  # time of the latest space

    def key(self, key: str, t: float) -> bool | None:
        """A key arrived at time `t` (seconds, any monotonic clock)."""
        if key in (ENTER, "\r"):
            self._mode = None if self.talking else "latched"
            self._last = t
            return self._set(not self.talking)
        if key != SPACE:
            return None
        previous, self._last = self._last, t
        if not self.talking:
            self._mode = "pending"
            return self._set(True)
        if self._mode == "hold" or t - previous <= self.repeat_window_s:
            self._mode = "hold"  # a repeat: the key is still down
            return None
        self._mode = None  # a fresh press after a latched tap: stop
        return self._set(False)

    def deadline(self) -> float | None:
        """When `expire` should be called next (None: only a key can change anything)."""
        if self._mode == "pending":
            return self._last + self.repeat_window_s
        if self._mode == "hold":
            return self._last + self.release_s
        return None

    def expire(self, t: float) -> bool | None:
        """Time passed without a key: a pending tap latches, a held key is released."""
        deadline = self.deadline()
        if deadline is None or t < deadline:
            return None
        if self._mode == "pending":
            self._mode = "latched"
            return None
        self._mode = None
        return self._set(False)

    def reset(self) -> None:
        """Back to not talking (e.g. the mic could not be opened)."""
        self._mode, self.talking = None, False

    def _set(self, talking: bool) -> bool:
        self.talking = talking
        return talking


def keys_are_live(stdin: TextIO) -> bool:
    """True when single key presses (and their repeats) can be read: stdin is a terminal."""
    try:
        return stdin.isatty()
    except (AttributeError, ValueError):
        return False


async def key_presses(stdin: TextIO) -> AsyncIterator[str | None]:
    """Keys as they are pressed (a TTY, cbreak mode) or "\\n" per line (anything else); None at the end."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    if keys_are_live(stdin):
        import termios
        import tty

        fd = stdin.fileno()
        saved = termios.tcgetattr(fd)

        def readable() -> None:
            try:
                data = os.read(fd, 64)
            except OSError:
                data = b""
            if not data:
                queue.put_nowait(None)
                return
            for char in data.decode(errors="ignore"):
                queue.put_nowait(char)

        tty.setcbreak(fd)  # keys one by one, no echo; Ctrl-C still interrupts
        loop.add_reader(fd, readable)
        try:
            while True:
                key = await queue.get()
                yield None if key == EOF_KEY else key
                if key in (None, EOF_KEY):
                    return
        finally:
            loop.remove_reader(fd)
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        return

    def read_lines() -> None:
        # a daemon thread, not the default executor: a blocked readline must never hold up shutdown
        for _ in stdin:
            loop.call_soon_threadsafe(queue.put_nowait, ENTER)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read_lines, name="ptt-stdin", daemon=True).start()
    while True:
        key = await queue.get()
        yield key
        if key is None:
            return


async def drive_push_to_talk(keys: AsyncIterator[str | None], talk: Callable[[bool], Awaitable[bool]],
                             *, machine: HoldToTalk | None = None,
                             clock: Callable[[], float] | None = None) -> None:
    """Turn key presses into `talk(True/False)` calls until the keys end. `talk` returns False when it could not
    start talking (then the keys start from "not talking" again)."""
    machine = machine or HoldToTalk()
    clock = clock or asyncio.get_running_loop().time
    iterator = aiter(keys)
    next_key: asyncio.Task | None = None
    try:
        while True:
            if next_key is None:
                next_key = asyncio.ensure_future(anext(iterator))
            deadline = machine.deadline()
            timeout = None if deadline is None else max(0.0, deadline - clock())
            done, _ = await asyncio.wait({next_key}, timeout=timeout)
            if not done:
                # A loop that was busy past the deadline wakes with the timeout and the waiting key in the same
                # pass; let the key through first, or a held key would count as let go while its repeat sat unread.
                for _ in range(3):
                    await asyncio.sleep(0)
                    if next_key.done():
                        done = {next_key}
                        break
            if next_key in done:
                key, next_key = next_key.result(), None
                if key is None:
                    return
                change = machine.key(key, clock())
            else:
                change = machine.expire(clock())
            if change is not None and not await talk(change) and change:
                machine.reset()
    finally:
        if next_key is not None:
            next_key.cancel()
            await asyncio.gather(next_key, return_exceptions=True)
        with contextlib.suppress(Exception):
            await cast("AsyncGenerator[str | None, None]", iterator).aclose()

