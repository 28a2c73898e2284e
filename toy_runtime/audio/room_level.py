"""How loud the room is with the toy silent, and the level a voice must reach to count as speech while it talks.

Beside a fan or in a room of talkers, the VAD calls the room speech while the toy talks: AEC3's suppressor keys the
room down at the toy's syllables (a fan), or the room *is* voices (babble, speech in 97-99 % of its frames). Every
such start interrupts the toy, and a VAD held in speech by the room cannot hear the child begin: on the echo rig
21 false barge-ins in 51 answers beside a fan, 48 in babble, where 2 of 50 children over the toy were heard.

A child who interrupts a toy speaks to it, from near: on the rig the child's speech frames came out of the front end
at a median 32 dB above the room's usual level, the room's own "speech" frames at most ~8 dB above it. So while the
toy sounds a frame counts as speech only if the VAD says so *and* its level is `margin_db` over the room's level
(`speech_floor_db`). The room's level is the 20th percentile of the front end's output levels over the last 30 s
of frames with the toy silent: a child talking in most of those frames still leaves the pauses between words, and a
percentile does not follow one loud moment. While the toy is silent nothing changes: a soft child is heard as before.

Until the room has been heard for 5 s the floor stands 6 dB higher: a short look at a room of talkers reads it
quieter than it is.

Live on the echo rig (`bench ears --answers 100`; `[ears] barge_in_margin_db`, docs/benchmarks.md, "Ears", tenth
and eleventh rounds): false barge-ins in 51 answers beside a fan 21 → 0, children over the toy heard 45 → 50 of 50;
in babble 48 → 0, children heard 2 → 50 of 50; a quiet room unchanged.
"""

from __future__ import annotations

from collections import deque

from ..ports.audio import AudioFrame

__all__ = ["RoomLevel", "heard_as_speech"]


class RoomLevel:
    """The room's usual level (dBFS), from the levels of frames heard with the toy silent."""

    def __init__(self, *, percentile: float = 20.0, keep_frames: int = 1500, least_frames: int = 25,
                 every_frames: int = 50, young_frames: int = 250, young_margin_db: float = 6.0) -> None:
        self.percentile = percentile
        self._levels: deque[float] = deque(maxlen=keep_frames)  # 30 s of 20 ms frames
        # No level before half a second of the room: the rig's first answer came 0.5 s after the start, and with a
        # second needed its whole first answer had no floor (the one false barge-in left beside a fan came in it)
        self._least = least_frames
        self._every = every_frames  # the percentile is taken again once a second, not per frame
        self._since = 0
        self._level: float | None = None
        # A short look at a room is a poor one: the rig's room of talkers, heard for its first half second, read
        # 6 dB quieter than its level over 30 s (-54.4 against -48.3 dBFS), and the talkers' next loud moment
        # cleared that floor and interrupted the toy's first answer (the one false barge-in left in babble). Until
        # the room has been heard `young_frames` (5 s), a floor stands `young_margin_db` higher; beside a fan the
        # first half second was within 1 dB of the 30 s level, and a child over the toy is ~30 dB above it.
        # Counted by the levels kept, so it must be no more than `keep_frames`.
        if young_frames > keep_frames:
            raise ValueError(f"young_frames {young_frames} is more than the {keep_frames} frames kept")
        self._young = young_frames
        self.young_margin_db = young_margin_db

    def hear(self, level_db: float) -> None:
        """One frame's level (dBFS), heard while the toy was silent."""
        self._levels.append(level_db)
        self._since += 1
        if len(self._levels) >= self._least and (self._level is None or self._since >= self._every):
            self._since = 0
            # sorted, not numpy: the listener imports this before `ready`, and numpy loads after it (start-up time)
            ranked = sorted(self._levels)
            self._level = ranked[round(self.percentile / 100 * (len(ranked) - 1))]

    @property
    def level_db(self) -> float | None:
        """The room's usual level; None until it has been heard for half a second."""
        return self._level

    def floor_db(self, margin_db: float) -> float | None:
        """The level speech must reach while the toy sounds: the room's level plus `margin_db`, plus
        `young_margin_db` while the room has been heard less than `young_frames`; None before its level."""
        if self._level is None:
            return None
        return self._level + margin_db + (self.young_margin_db if len(self._levels) < self._young else 0.0)


def heard_as_speech(is_speech: bool, frame: AudioFrame, level_db: float) -> bool:
    """The VAD's verdict on `frame`, held to the frame's speech floor: while the toy talks, speech must be louder
    than the room by the margin (`AudioFrame.speech_floor_db`); otherwise the VAD's word stands."""
    return is_speech and (frame.speech_floor_db is None or level_db >= frame.speech_floor_db)
