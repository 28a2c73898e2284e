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


def test_a_piece_of_an_answer_that_comes_after_its_audio_ran_out_is_counted_as_a_gap():
    """Silence heard inside an answer (its synthesizer was late) is counted; a piece in time, or the start of
    another answer after silence, is not."""
    import asyncio

    from toy_runtime.audio.pcm_io import AnswerFutures

    async def scenario() -> list[int]:
        sink = SoundDeviceSink(sample_rate_hz=RATE)
        sink._stream, sink._loop, sink._answers = object(), asyncio.get_running_loop(), AnswerFutures()
        one_block = b"\x10\x00" * FRAMES
        counts = []
        await sink.play(one_block, RATE, "t1.a1")
        await sink.play(one_block, RATE, "t1.a1")  # queued before the first ran out: no silence between them
        block(sink, underflow=False)
        block(sink, underflow=False)
        counts.append(sink.gaps_in_answers)
        block(sink, underflow=False)  # nothing queued: silence after the answer's audio
        await sink.play(one_block, RATE, "t1.a1")  # the same answer goes on after the silence: a gap
        counts.append(sink.gaps_in_answers)
        block(sink, underflow=False)
        block(sink, underflow=False)
        await sink.play(one_block, RATE, "t1.a2")  # another answer after silence: its start, not a gap
        counts.append(sink.gaps_in_answers)
        return counts

    assert asyncio.run(scenario()) == [0, 1, 1]
