"""A speech synthesizer that can be handed out while its engine is still loading.

`toy-runtime run` starts listening as soon as the recognizer and the microphone are ready, and loads the voice
(piper: ~0.7 s on two cores) right after: a child needs at least half a second to say something and the
endpointer another few hundred milliseconds to notice the end, so the voice is almost always ready before the
first answer. When it is not, the answer waits for it — it is never skipped — and the wait is recorded.
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Callable

from toy_runtime.ports.speech import SpeechEngineError, SpeechSynthesizer, SynthesizedAudio

__all__ = ["LoadingSynthesizer"]


class LoadingSynthesizer:
    """SpeechSynthesizer over a future engine.

    `engine` is an awaitable (usually a task loading the engine in a worker thread). `synthesize()` waits for it;
    a failed load becomes `SpeechEngineError("tts-model-failed")` on every call, so a turn fails the same way a
    broken engine would. A turn that is cancelled while waiting does not cancel the load. Every call that had to
    wait reports the wait in ms to `on_wait` (the runtime audits it).
    """

    def __init__(self, engine: "asyncio.Future[SpeechSynthesizer]", *, expected_rate_hz: int | None = None,
                 on_wait: Callable[[float], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._engine = engine
        self._expected_rate_hz = expected_rate_hz
        self._on_wait = on_wait
        self._clock = clock
        self._closed = False

    @property
    def engine(self) -> SpeechSynthesizer | None:
        """The loaded engine, or None while it is loading (or when loading failed)."""
        if self._engine.done() and not self._engine.cancelled() and self._engine.exception() is None:
            return self._engine.result()
        return None

    @property
    def sample_rate_hz(self) -> int:
        """The engine's output rate (the expected rate while it loads)."""
        engine = self.engine
        if engine is not None:
            return engine.sample_rate_hz
        if self._expected_rate_hz is None:
            raise RuntimeError("the voice is still loading and no expected rate was given")
        return self._expected_rate_hz

    async def wait(self) -> SpeechSynthesizer:
        """The engine, once loaded; SpeechEngineError when loading failed or was cancelled."""
        if not self._engine.done():
            started = self._clock()
            # asyncio.wait neither cancels the load when this caller is cancelled (the load goes on for the next
            # turn) nor raises the load's own failure or cancellation: both are reported below, the same way for
            # every caller. A CancelledError here is the caller's, re-raised even if the engine arrived meanwhile.
            await asyncio.wait((self._engine,))
            if self._on_wait is not None:
                self._on_wait(round((self._clock() - started) * 1000, 1))
        if self._engine.cancelled():
            raise SpeechEngineError("tts-model-failed", "loading the voice was cancelled")
        error = self._engine.exception()
        if error is not None:
            if isinstance(error, SpeechEngineError):
                raise error
            raise SpeechEngineError("tts-model-failed", f"the voice could not be loaded: {error}") from error
        return self._engine.result()

    async def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """The engine's pieces for `text`, after waiting for the engine if it is still loading."""
        engine = await self.wait()
        async for piece in engine.synthesize(text):
            yield piece

    def close(self) -> None:
        """Close the engine now, or as soon as it finishes loading."""
        if self._closed:
            return
        self._closed = True

        def close_engine(future: "asyncio.Future[SpeechSynthesizer]") -> None:
            if future.cancelled() or future.exception() is not None:
                return
            close = getattr(future.result(), "close", None)
            if close is not None:
                close()

        if self._engine.done():
            close_engine(self._engine)
        else:
            self._engine.add_done_callback(close_engine)
