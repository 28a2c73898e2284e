"""The speaker tells underruns that could be heard (answer audio queued or playing) from those in silence."""

from __future__ import annotations

from types import SimpleNamespace

from toy_runtime.adapters.sounddevice_speaker import SoundDeviceSink

RATE = 16000
FRAMES = RATE // 100  # one 10 ms block


def block(sink: SoundDeviceSink, *, underflow: bool) -> bytearray:
    out = bytearray(FRAMES * 2)
    status = SimpleNamespace(output_underflow=underflow)
    timing = SimpleNamespace(outputBufferDacTime=0.0, currentTime=0.0)
    sink._callback(out, FRAMES, timing, status)  # the PortAudio thread's call, made here
    return out


def test_underruns_in_silence_are_counted_apart_from_those_while_an_answer_plays():
    sink = SoundDeviceSink(sample_rate_hz=RATE)
    block(sink, underflow=True)  # silence before anything was played
    assert (sink.underruns, sink.underruns_while_playing) == (1, 0)
    with sink._lock:
        sink._items.append(["a1", b"\x10\x00" * (FRAMES * 2), 0])  # two blocks of answer audio
    assert any(block(sink, underflow=True))  # late while the answer plays: a gap the child hears
    assert any(block(sink, underflow=False))
    assert (sink.underruns, sink.underruns_while_playing) == (2, 1)
    assert not any(block(sink, underflow=True))  # the answer's last block had just played: still heard
    assert not any(block(sink, underflow=True))  # silence again
    assert (sink.underruns, sink.underruns_while_playing) == (4, 2)
