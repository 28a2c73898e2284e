"""A linear echo canceller for the recognizer's copy: speexdsp's MDF filter (Debian's `libspeexdsp1`, BSD) through ctypes.

WebRTC's AEC3 (adapters/webrtc_apm.py) removes the toy's voice well enough for the VAD and the own-voice check, but
its residual suppressor also weakens what the child says over the toy, most of all the first syllable: Whisper heard
"stop talking please" as "up talking please" and "tell me about dinosaurs" as "help me amount dinosaurs". MDF is an
adaptive linear filter with no suppressor: it subtracts its estimate of the echo and leaves everything else alone. It
leaves more echo than AEC3 (the issue measured 31-43 % of echo frames still looking like speech: no good for barge-in)
but the recognizer only hears an utterance the VAD, on AEC3's copy, has already opened. On one echo-rig capture the
child's words over the toy went from 59.7 % right (AEC3's output) to 79.1 % (silence: 79.4 %); docs/benchmarks.md,
"Ears", eighth round.

MDF has no delay estimate: its filter covers the echo from `render_lead` to `render_lead + filter` samples behind
the render. The capture stage measures the echo's delay itself (audio/echo_delay.py) and sets the lead from it
(`set_render_lead`), a little early so the filter also sees the echo's onset.

The library ships in Debian and Raspberry Pi OS (`libspeexdsp1`, pulled in by PulseAudio); there is no wheel to
build. Each 10 ms frame is one C call that releases the GIL, ~40 µs here with a 200 ms filter.
"""

from __future__ import annotations

import ctypes
import ctypes.util
__all__ = ["SpeexEchoCanceller", "load_speexdsp"]

_SET_SAMPLING_RATE = 24  # SPEEX_ECHO_SET_SAMPLING_RATE (speex/speex_echo.h)
_LIBRARY = None


def load_speexdsp() -> ctypes.CDLL:
    """The speexdsp shared library, its functions typed; OSError naming the Debian package when it is missing."""
    global _LIBRARY
    if _LIBRARY is not None:
        return _LIBRARY
    name = ctypes.util.find_library("speexdsp") or "libspeexdsp.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise OSError(f"speexdsp's library is missing ({exc}): apt-get install libspeexdsp1") from None
    lib.speex_echo_state_init.restype = ctypes.c_void_p
    lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_echo_state_destroy.restype = None
    lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
    lib.speex_echo_cancellation.restype = None
    lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]
    lib.speex_echo_ctl.restype = ctypes.c_int
    lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    _LIBRARY = lib
    return lib


class SpeexEchoCanceller:
    """An `EchoCanceller` on speexdsp's MDF: linear echo cancellation only, no suppressor, no noise suppression.

    The filter lives as long as this object, so it stays converged across answers. The render passes through a
    delay line of `render_lead` samples first (0 at the start: the filter then covers the first `filter_ms`).
    """

    cancels_echo = True
    suppresses_noise = False
    delay_samples = 0  # the output frame is the input frame minus the echo estimate: no algorithmic delay

    def __init__(self, sample_rate_hz: int = 16000, *, filter_ms: int = 200) -> None:
        if sample_rate_hz % 100:
            raise ValueError(f"sample rate {sample_rate_hz} Hz has no whole 10 ms frame")
        if not 20 <= filter_ms <= 1000:
            raise ValueError(f"filter_ms {filter_ms} is outside 20..1000")
        self._lib = load_speexdsp()
        self.sample_rate_hz = sample_rate_hz
        self.filter_ms = filter_ms
        self._samples = sample_rate_hz // 100
        self._state = self._lib.speex_echo_state_init(self._samples, sample_rate_hz * filter_ms // 1000)
        if not self._state:
            raise MemoryError("speex_echo_state_init returned NULL")
        rate = ctypes.c_int(sample_rate_hz)
        self._lib.speex_echo_ctl(self._state, _SET_SAMPLING_RATE, ctypes.byref(rate))
        self._out = ctypes.create_string_buffer(2 * self._samples)
        # the render's delay line: what leaves it was played `render_lead` samples ago
        self._line = bytearray()
        self.render_lead = 0

    def set_render_lead(self, samples: int) -> None:
        """Delay the render by `samples` before the filter: the echo arrives that much (or a little more) after its
        reference. The filter re-adapts to the new relation in a second or so; nothing else changes."""
        samples = max(0, int(samples))
        change = samples - self.render_lead
        if change > 0:
            self._line[:0] = bytes(2 * change)  # render older than the line held: silence
        else:
            del self._line[: -2 * change]
        self.render_lead = samples

    def process(self, capture: bytes, render: bytes) -> bytes:
        """Feed `render` (what the speaker played at this moment), return `capture` minus the echo estimate."""
        n = self._samples
        if len(capture) != 2 * n or len(render) != 2 * n:
            raise ValueError(f"frames must be 10 ms ({2 * n} bytes); got {len(capture)} and {len(render)}")
        played = render
        if self.render_lead:
            self._line += render
            played = bytes(self._line[: len(render)])
            del self._line[: len(render)]
        self._lib.speex_echo_cancellation(self._state, capture, played, self._out)
        return self._out.raw

    def describe(self) -> str:
        """One line: the linear canceller and its reach."""
        return f"echo cancellation: speexdsp MDF, linear ({self.filter_ms} ms filter)"

    def close(self) -> None:
        """Free the native state (also on garbage collection)."""
        if self._state:
            self._lib.speex_echo_state_destroy(self._state)
            self._state = None

    def __del__(self) -> None:
        if getattr(self, "_state", None):  # None when __init__ failed before the state existed
            self.close()

