"""ALSA implementation of the `Mixer` port (pyalsaaudio): one simple mixer control, in percent, with mute.

- Percent ↔ the control's raw range (`getrange`), rounded, clamped to 0..100 both ways.
- Mute uses the control's playback switch when it has one; otherwise (or with `mute_mode="volume"`) a
  remembered-volume mute: the level goes to 0 and the previous level is remembered for unmute. That memory lives in
  this object; an outside volume change while muted ends the mute.
- Every call reads back from the device, and a change made by someone else (pactl, alsamixer, another process) must
  be seen by the next call. pyalsaaudio caches element values; handling pending mixer events before a read should
  fix that for kernel (`hw:`) mixers (not verified here), but through PulseAudio's ALSA plugin the event can arrive
  after the read (measured: a stale read right after `pactl set-sink-volume`). So by default the control is opened
  afresh for each call (`reopen_per_call=True`; measured through `pulse` on a loaded 2-core VM: get ~11 ms,
  set_level ~33 ms, versus 0.1 ms / 5 ms with one kept handle). With `reopen_per_call=False` one handle is kept and
  its events are handled before every read. A failing handle (e.g. PulseAudio restarted) is reopened once.
- Calls run in a worker thread (`asyncio.to_thread`), serialised by a lock.
- A missing device or control raises MixerError(code="no_such_device" | "no_such_control" |
  "not_a_playback_control", available=[controls that exist]); other ALSA failures raise code "mixer_failed".
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal

from toy_runtime.ports.device import MixerError, MixerState

_INSTALL_HINT = "pyalsaaudio is not installed: pip install 'toy-runtime[alsa]' (needs libasound2-dev to build)"

# volumecap() names that mean "has a playback volume" / switchcap() names that mean "has a playback mute switch".
_PLAYBACK_VOLUME = {"Volume", "Joined Volume", "Playback Volume", "Joined Playback Volume"}
_PLAYBACK_SWITCH = {"Mute", "Joined Mute", "Playback Mute", "Joined Playback Mute"}


def _alsaaudio() -> Any:
    try:
        import alsaaudio
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return alsaaudio


def percent_to_raw(percent: int, lo: int, hi: int) -> int:
    """0..100 → lo..hi (clamped, rounded to the nearest step)."""
    percent = max(0, min(100, int(percent)))
    return lo + round(percent * (hi - lo) / 100) if hi > lo else lo


def raw_to_percent(raw: int, lo: int, hi: int) -> int:
    """lo..hi → 0..100 (clamped: PulseAudio allows more than 100 %)."""
    if hi <= lo:
        return 0
    return max(0, min(100, round((raw - lo) * 100 / (hi - lo))))


class AlsaMixer:
    """The `Mixer` port over an ALSA simple mixer control (`Master`, `PCM`, `Speaker`...) of `device`
    (`default`, `pulse`, `hw:1`...) or of card `cardindex` (which then takes precedence over `device`)."""

    def __init__(
        self,
        device: str = "default",
        control: str = "Master",
        cardindex: int | None = None,
        *,
        mute_mode: Literal["auto", "switch", "volume"] = "auto",
        reopen_per_call: bool = True,
    ) -> None:
        self.device = device
        self.control = control
        self.cardindex = cardindex
        self.mute_mode = mute_mode
        self.reopen_per_call = reopen_per_call
        self._alsa = _alsaaudio()
        self._mixer: Any = None
        self._range: tuple[int, int] = (0, 100)
        self._has_switch = False
        self._soft_muted_level: int | None = None  # set while a remembered-volume mute is active
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f"card {self.cardindex}" if self.cardindex is not None else self.device
        return f"AlsaMixer({where!r}, {self.control!r})"

    # --- discovery --------------------------------------------------------------------------------------------------

    def _where(self) -> dict[str, Any]:
        return {"cardindex": self.cardindex} if self.cardindex is not None else {"device": self.device}

    def available_controls(self) -> list[str]:
        """The simple mixer controls of this device (MixerError no_such_device if it cannot be opened)."""
        try:
            return list(self._alsa.mixers(**self._where()))
        except self._alsa.ALSAAudioError as exc:
            raise MixerError("no_such_device", f"ALSA mixer device {self._describe()} cannot be opened: {exc}",
                             available=[]) from None

    def _describe(self) -> str:
        return f"card {self.cardindex}" if self.cardindex is not None else repr(self.device)

    # --- opening (worker thread, lock held) -------------------------------------------------------------------------

    def _open(self) -> Any:
        alsa = self._alsa
        try:
            mixer = alsa.Mixer(control=self.control, **self._where())
        except alsa.ALSAAudioError as exc:
            controls = self.available_controls()  # raises no_such_device when the device itself is missing
            if self.control in controls:
                raise MixerError("mixer_failed", f"cannot open {self.control!r} on {self._describe()}: {exc}",
                                 available=controls) from None
            raise MixerError("no_such_control",
                             f"no mixer control {self.control!r} on {self._describe()} ({exc}); "
                             f"it has: {', '.join(controls) or 'none'}", available=controls) from None
        if not _PLAYBACK_VOLUME & set(mixer.volumecap()):
            mixer.close()
            raise MixerError("not_a_playback_control", f"{self.control!r} on {self._describe()} has no playback "
                             "volume", available=self.available_controls())
        has_switch = bool(_PLAYBACK_SWITCH & set(mixer.switchcap()))
        if self.mute_mode == "switch" and not has_switch:
            mixer.close()
            raise MixerError("not_a_playback_control", f"{self.control!r} on {self._describe()} has no mute switch",
                             available=self.available_controls())
        lo, hi = mixer.getrange(pcmtype=alsa.PCM_PLAYBACK, units=alsa.VOLUME_UNITS_RAW)
        self._range = (int(lo), int(hi))
        self._has_switch = has_switch and self.mute_mode != "volume"
        return mixer

    def _with_mixer(self, op: Any) -> MixerState:
        """Run `op(mixer)` under the lock; reopen once if the device went away meanwhile."""
        alsa = self._alsa
        with self._lock:
            for attempt in (1, 2):
                if self._mixer is None:
                    self._mixer = self._open()
                try:
                    return op(self._mixer)
                except alsa.ALSAAudioError as exc:
                    self._close_locked()
                    if attempt == 2:
                        raise MixerError("mixer_failed", f"{self!r}: {exc}") from None
                finally:
                    if self.reopen_per_call:
                        self._close_locked()
            raise AssertionError("unreachable")

    def _close_locked(self) -> None:
        if self._mixer is not None:
            try:
                self._mixer.close()
            except self._alsa.ALSAAudioError:
                pass
            self._mixer = None

    # --- raw operations (worker thread, lock held) ------------------------------------------------------------------

    def _refresh(self, mixer: Any) -> None:
        # pyalsaaudio caches element values until pending events are handled: without this a long-lived handle
        # reports the level from before an outside change (a fresh handle has nothing pending: cheap no-op).
        mixer.handleevents()

    def _hw_level(self, mixer: Any) -> int:
        alsa = self._alsa
        raw = mixer.getvolume(pcmtype=alsa.PCM_PLAYBACK, units=alsa.VOLUME_UNITS_RAW)
        return raw_to_percent(max(raw) if raw else 0, *self._range)  # max: keeps a balanced pair at its level

    def _set_hw_level(self, mixer: Any, percent: int) -> None:
        alsa = self._alsa
        mixer.setvolume(percent_to_raw(percent, *self._range), pcmtype=alsa.PCM_PLAYBACK, units=alsa.VOLUME_UNITS_RAW)

    def _read(self, mixer: Any) -> MixerState:
        self._refresh(mixer)
        level = self._hw_level(mixer)
        if self._has_switch:
            muted = any(mixer.getmute())
            return MixerState(level=level, muted=muted)
        if self._soft_muted_level is not None:
            if level == 0:
                return MixerState(level=self._soft_muted_level, muted=True)
            self._soft_muted_level = None  # someone turned it up meanwhile: no longer muted
        return MixerState(level=level, muted=False)

    def _do_set_level(self, mixer: Any, percent: int) -> MixerState:
        percent = max(0, min(100, int(percent)))
        self._refresh(mixer)
        if not self._has_switch and self._soft_muted_level is not None and self._hw_level(mixer) == 0:
            self._soft_muted_level = percent  # stay muted, unmute restores the new level (like a switch would)
        else:
            self._set_hw_level(mixer, percent)
        return self._read(mixer)

    def _do_set_muted(self, mixer: Any, muted: bool) -> MixerState:
        self._refresh(mixer)
        if self._has_switch:
            mixer.setmute(1 if muted else 0)
        elif muted:
            if self._soft_muted_level is None or self._hw_level(mixer) != 0:
                self._soft_muted_level = self._hw_level(mixer)
                self._set_hw_level(mixer, 0)
        elif self._soft_muted_level is not None:
            level, self._soft_muted_level = self._soft_muted_level, None
            if self._hw_level(mixer) == 0:
                self._set_hw_level(mixer, level)
        return self._read(mixer)

    # --- the port ---------------------------------------------------------------------------------------------------

    async def get(self) -> MixerState:
        """The current level and mute, read from the device."""
        return await asyncio.to_thread(self._with_mixer, self._read)

    async def set_level(self, percent: int) -> MixerState:
        """Set the level (clamped to 0..100) without changing mute; returns the read-back state."""
        return await asyncio.to_thread(self._with_mixer, lambda m: self._do_set_level(m, percent))

    async def set_muted(self, muted: bool) -> MixerState:
        """Mute or unmute, keeping the level; returns the read-back state."""
        return await asyncio.to_thread(self._with_mixer, lambda m: self._do_set_muted(m, muted))

    async def check(self) -> MixerState:
        """Open the control now (fail fast at start-up with a MixerError) and return the current state."""
        return await self.get()

    def close(self) -> None:
        """Release the ALSA handle (it is reopened on the next call)."""
        with self._lock:
            self._close_locked()
