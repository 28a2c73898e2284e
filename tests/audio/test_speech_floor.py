"""While the toy talks, only speech louder than the room by the margin counts (audio/room_level.py).

Beside a fan or among talkers the VAD took the room for speech while the toy talked: 21 false barge-ins in 51
answers beside a fan on the echo rig, 48 in babble, where the VAD held in speech by the room heard 2 of 50 children
begin (docs/benchmarks.md, "Ears", tenth round). The echo stage learns the room's usual level with the toy silent and
dates every frame with the toy sounding with a speech floor; the listener holds the VAD to it.
"""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from tests.audio.test_room_fill import scene
from toy_runtime.adapters.webrtc_vad import WebRtcVad
from toy_runtime.app.engines import endpointer_config
from toy_runtime.audio.endpointer import Endpointer, EndpointerConfig, SpeechStarted
from toy_runtime.config import load_settings
from toy_runtime.audio.level import level_db
from toy_runtime.audio.listener import Listener, SpeechStart, Utterance
from toy_runtime.audio.room_level import RoomLevel, heard_as_speech
from toy_runtime.audio.wrapped_source import WrappedSource
from toy_runtime.fakes.audio import ListSource, ScriptedASR, ScriptedVAD
from toy_runtime.ports.audio import AudioFrame
from toy_runtime.testing.services import unavailable

RATE = 16000


def test_the_rooms_level_is_its_own_not_a_talkers():
    room = RoomLevel()
    for i in range(24):
        room.hear(-50.0)
    assert room.level_db is None  # not before half a second of the room
    for i in range(1000):  # somebody talking in 70 % of the frames, the room in their pauses
        room.hear(-20.0 if i % 10 < 7 else -50.0)
    assert room.level_db == pytest.approx(-50.0, abs=0.5)


def test_the_rooms_level_follows_a_room_that_got_louder():
    room = RoomLevel()
    for _ in range(1500):
        room.hear(-60.0)
    for _ in range(1500):  # the 30 s it keeps, all of the louder room
        room.hear(-40.0)
    assert room.level_db == pytest.approx(-40.0, abs=0.5)


def test_a_room_heard_briefly_sets_a_higher_floor():
    """A short look at a room of talkers read it 6 dB quieter than its 30 s level: until the room has been heard
    for 5 s the floor stands 6 dB higher, then the margin alone."""
    room = RoomLevel()
    assert room.floor_db(12.0) is None
    for _ in range(25):
        room.hear(-55.0)
    assert room.floor_db(12.0) == pytest.approx(-55.0 + 12.0 + 6.0)
    for _ in range(224):
        room.hear(-55.0)
    assert room.floor_db(12.0) == pytest.approx(-37.0)  # 249 frames: still young
    room.hear(-55.0)
    assert room.floor_db(12.0) == pytest.approx(-43.0)


def floors(stage, mic: np.ndarray) -> list[tuple[AudioFrame, float | None]]:
    pcm = np.clip(mic, -32768, 32767).astype(np.int16)
    out = []
    for i in range(len(pcm) // 320):
        frame = stage.clean(AudioFrame(pcm[i * 320 : (i + 1) * 320].tobytes(), RATE, 10.0 + i * 0.02))
        out.append((frame, frame.speech_floor_db))
    return out


def test_frames_with_the_toy_talking_carry_the_rooms_level_plus_the_margin():
    stage, mic, _ = scene()  # a room at -42 dBFS; the toy talks from 2 s on
    out = floors(stage, mic)
    room = np.median([level_db(f.pcm, stride=1) for f, _ in out[10:95]])
    assert all(floor is None for _, floor in out[:100])  # the toy silent: the VAD decides alone
    talking = [floor for _, floor in out[102:]]
    assert all(floor is not None for floor in talking)
    # the room heard for 2 s only: the floor stands 6 dB higher until it has been heard for 5 s
    assert max(abs(floor - (room + 12.0 + 6.0)) for floor in talking) < 1.5


def test_no_floor_with_the_margin_off():
    stage, mic, _ = scene()
    stage.barge_in_margin_db = None
    assert all(floor is None for _, floor in floors(stage, mic))


@pytest.fixture(scope="module")
def babble() -> np.ndarray:
    if shutil.which("espeak-ng") is None:
        unavailable("espeak-ng is not installed (apt install espeak-ng): the room's talkers")
    from toy_runtime.bench.ears import noise_pcm

    return np.frombuffer(noise_pcm("babble", 4.0, level_dbfs=-42.0), np.int16).astype(float)


def child_voice() -> np.ndarray:
    from toy_runtime.testing.speech import espeak_pcm

    x = np.frombuffer(espeak_pcm("stop please", "en-us+f3"), np.int16).astype(float)
    return x / np.sqrt(np.mean(x**2)) * 32768 * 10 ** (-22 / 20)  # as loud as the rig's child came out


def test_the_real_vad_hears_the_talkers_in_the_room_but_not_over_the_toy(babble):
    """Four talkers in the room (espeak, 20 dB under the child), the toy talking from 2 s; the child speaks over it
    at 3 s. WebRTC's VAD calls the room speech whether or not the toy talks; held to the floor, it hears only the
    child while the toy talks."""
    stage, mic, _ = scene(room_rms=0.0)
    child = child_voice()[: RATE]
    mic = mic + babble[: len(mic)]
    mic[3 * RATE : 3 * RATE + len(child)] += child
    vad = WebRtcVad(2)
    out = floors(stage, mic)
    toy_alone = range(105, 148)  # the toy talking over the room, the child not yet
    child_frames = range(150, 150 + len(child) // 320)
    heard = [vad.is_speech(frame) for frame, _ in out]
    held = [heard_as_speech(vad.is_speech(frame), frame, level_db(frame.pcm)) for frame, _ in out]
    assert np.mean([heard[i] for i in toy_alone]) > 0.5  # without the floor the room is speech
    assert np.mean([held[i] for i in toy_alone]) < 0.02
    # the runtime's endpointer over the held verdicts: the child starts speech over the toy, the room never does
    endpointer = Endpointer(endpointer_config(load_settings(None, env={})))
    starts = [int(event.speech[0]) for i, (frame, _) in enumerate(out)
              for event in endpointer.process(i, held[i], 20.0, level_db(frame.pcm)) if isinstance(event, SpeechStarted)]
    over_the_toy = [s for s in starts if s >= 100]
    assert len(over_the_toy) == 1 and over_the_toy[0] in child_frames, starts


class Floored(WrappedSource):
    """Every frame dated with one speech floor, as the echo stage dates them while the toy talks."""

    def __init__(self, source, floor_db: float) -> None:
        super().__init__(source)
        self.floor_db = floor_db

    def _frame(self, frame: AudioFrame) -> AudioFrame:
        return dataclasses.replace(frame, speech_floor_db=self.floor_db)


@pytest.mark.parametrize("floor_db, heard", [(-30.0, True), (-3.0, False)])
async def test_the_listener_holds_the_vad_to_the_frames_floor(floor_db, heard):
    """A tone at -15 dBFS that the scripted VAD calls speech: an utterance under a floor below it, nothing under
    a floor above it."""
    src = ListSource.from_segments([("silence", 500), ("speech", 600), ("silence", 800)], clock=lambda: 100.0)
    cfg = EndpointerConfig(preroll_ms=200, start_ms=60, hangover_ms=200, min_utterance_ms=200, max_utterance_ms=10000)
    listener = Listener(Floored(src, floor_db), ScriptedVAD(), ScriptedASR(["stop"]), cfg)
    await src.start()
    try:
        events = [e async for e in listener.events()]
    finally:
        await listener.aclose()
    kinds = [type(e) for e in events]
    assert kinds == ([SpeechStart, Utterance] if heard else [])
