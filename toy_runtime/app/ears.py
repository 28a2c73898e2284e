"""The capture front end, assembled from `[ears]`: microphone → echo canceller (+ noise suppression) → wake word.

Only what is switched on is built: with everything off the listener reads the microphone directly (idle CPU as
before). The speaker reports what it plays to `reference`, the canceller's far end; the same `EchoReference`
outlives every session's output stream, so the filter stays converged from one answer to the next. The canceller
itself is put in after READY (`load_canceller`, before the voice: audio/front_end.py says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..config import Settings

__all__ = ["Ears", "build_ears", "load_canceller", "own_voice_check", "wake_detector"]


@dataclass
class Ears:
    """What the voice loop listens through, and the parts the console, doctor and tests look at."""

    source: Any  # an AudioSource: the microphone, possibly wrapped
    reference: Any = None  # audio.echo_reference.EchoReference for every speaker (None: no echo cancellation)
    front_end: Any = None  # audio.front_end.FrontEndSource (None: echo cancellation and noise suppression off)
    wake: Any = None  # audio.wake_stage.WakeWordSource (None: the trigger is not the wake word)

    def describe(self) -> list[str]:
        """One line per stage for `run`'s start-up, the console and `doctor`."""
        lines = [self.front_end.describe() if self.front_end is not None
                 else "echo cancellation: off, noise suppression: off"]
        if self.wake is not None:
            views = getattr(self.wake.detector, "factors", ())
            lines.append(f"wake word: {self.wake.detector.name!r}"
                         + (f", also heard {', '.join(f'{f:g}x' for f in views)} lower" if views else ""))
        return lines

    @property
    def echo(self) -> Any:
        """The installed EchoCancelledSource (None until loaded, or when off)."""
        return self.front_end.processor if self.front_end is not None else None

    def echo_likeness(self, window_s: float) -> float:
        """The installed canceller's `echo_likeness` (0 before it is in: the toy cannot sound before then)."""
        echo = self.echo
        return echo.echo_likeness(window_s) if echo is not None else 0.0

    def echo_disturbed(self) -> bool:
        """The installed canceller's `recently_disturbed` (True before it is in)."""
        echo = self.echo
        return echo.recently_disturbed() if echo is not None else True

    def echo_learning(self) -> bool:
        """The installed canceller's `learning` (True before it is in: nothing learnt yet)."""
        echo = self.echo
        return echo.learning() if echo is not None else True


def own_voice_check(ears: Ears) -> Any:
    """The own-voice check the voice loop asks before a speech start may stop an answer (audio/own_voice.py), over
    whatever canceller is in the slot when it asks; None without echo cancellation (nothing to compare with).

    It must not bind the canceller itself: that loads after READY, after the voice loop is built, and a check
    built on `ears.echo` then was None — `run` had no own-voice check at all, and its first answer interrupted
    itself once in 9 clean-clone runs and 1 in 20 busy ones ("It is…", stop 102-133 ms)."""
    from ..audio.own_voice import OwnVoiceCheck

    return (OwnVoiceCheck(ears.echo_likeness, ears.echo_disturbed, ears.echo_learning) if ears.reference is not None
            else None)


def build_ears(settings: Settings, mic: Any, *, on_wake: Callable[[float], None] | None = None) -> Ears:
    """The front end's slots over `mic` as `[ears]` and `[session] trigger` ask. Cheap, except the wake-word
    model, which listening needs at once (blocking: call it from a worker thread)."""
    e = settings.ears
    ears = Ears(source=mic)
    if e.echo_cancellation or e.noise_suppression or e.auto_gain:
        from importlib.util import find_spec

        if find_spec("livekit") is None:  # a start error now, not a failure after READY when it loads
            raise ValueError("echo cancellation and noise suppression need the livekit package (pip install "
                             "livekit), or set [ears] echo_cancellation = false and noise_suppression = false")
        from ..audio.echo_reference import EchoReference
        from ..audio.front_end import FrontEndSource

        if e.echo_cancellation:
            ears.reference = EchoReference(settings.audio.sample_rate_hz)
            if e.recognizer_echo == "linear":
                from ..adapters.speex_aec import load_speexdsp

                try:
                    load_speexdsp()  # a start error now, not after READY
                except OSError as exc:
                    raise ValueError(f"recognizer_echo = \"linear\": {exc}, or set it to \"aec3\"") from None
        ears.front_end = ears.source = FrontEndSource(mic)
    if settings.session.trigger == "wake_word":
        from ..audio.wake_stage import WakeWordSource

        ears.wake = ears.source = WakeWordSource(ears.source, wake_detector(settings), on_wake or (lambda _at: None))
    return ears


def wake_detector(settings: Settings) -> Any:
    """The wake-word detector `[ears]` asks for: the model at its cutoff, and for a builtin with a measured view
    (`TUNED_VIEWS`) the same model listening to the audio played lower too (audio/wake_views.py). Loads the
    models (blocking)."""
    from ..adapters.micro_wakeword import TUNED_VIEWS, MicroWakeWordDetector

    e = settings.ears
    primary = MicroWakeWordDetector(e.wake_word_model, probability_cutoff=e.wake_word_cutoff)
    views = TUNED_VIEWS.get(e.wake_word_model, ()) if e.wake_word_pitch_view else ()
    if not views:
        return primary
    from ..audio.wake_views import PitchViews

    return PitchViews(primary, [(factor, MicroWakeWordDetector(e.wake_word_model, probability_cutoff=cutoff))
                                for factor, cutoff in views])


def load_canceller(settings: Settings, ears: Ears) -> None:
    """Load the canceller (WebRTC APM, numpy; speexdsp for the recognizer's copy) and put it into the front end's
    slot (blocking: a worker thread)."""
    if ears.front_end is None:
        return
    from ..audio.echo_reference import EchoReference

    # with echo cancellation off the canceller ignores its render frames: a reference nobody feeds will do
    reference = ears.reference if ears.reference is not None else EchoReference(settings.audio.sample_rate_hz)
    ears.front_end.install(echo_stage(settings, ears.front_end.source, reference))


def echo_stage(settings: Settings, source: Any, reference: Any, *,
               wrap_canceller: Callable[[Any], Any] = lambda canceller: canceller,
               hold_delay: bool = True) -> Any:
    """The capture stage `[ears]` asks for over `source`: `run`'s, and `bench ears`' (which wraps the canceller to
    record what it did). Blocking: it loads the native libraries."""
    from ..adapters.webrtc_apm import WebRtcAudioProcessor
    from ..audio.echo_stage import EchoCancelledSource

    e = settings.ears
    rate = settings.audio.sample_rate_hz
    # Two processors when noise is suppressed: the recognizer hears the echo-cancelled audio, the VAD and the wake
    # word the suppressed one (audio/echo_stage.py says why)
    canceller = WebRtcAudioProcessor(rate, echo_cancellation=e.echo_cancellation, noise_suppression=False,
                                     auto_gain=e.auto_gain)
    suppressor = (WebRtcAudioProcessor(rate, echo_cancellation=False, noise_suppression=True, high_pass_filter=False)
                  if e.noise_suppression else None)
    recognizer_canceller = None
    if e.echo_cancellation and e.recognizer_echo == "linear":
        from ..adapters.speex_aec import SpeexEchoCanceller

        recognizer_canceller = SpeexEchoCanceller(rate)
    stage = EchoCancelledSource(source, wrap_canceller(canceller), reference, suppressor=suppressor,
                                recognizer_canceller=recognizer_canceller, hold_delay=hold_delay)
    stage.barge_in_margin_db = e.barge_in_margin_db or None
    return stage
