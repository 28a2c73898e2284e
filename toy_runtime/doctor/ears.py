"""The capture front end's check: the canceller (and the wake word) load, and the speaker's echo comes back after
its reference, within the canceller's reach (a short soft probe is played)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import Settings
from .verdict import Verdict, fail, in_thread, ok, skip, warn

if TYPE_CHECKING:
    from ..adapters.webrtc_apm import WebRtcAudioProcessor


def _load(settings: Settings) -> tuple[WebRtcAudioProcessor, str]:
    """The canceller as `run` loads it, and what else the front end has (the recognizer's canceller, the wake word)."""
    from ..adapters.webrtc_apm import WebRtcAudioProcessor

    e = settings.ears
    canceller = WebRtcAudioProcessor(settings.audio.sample_rate_hz, echo_cancellation=e.echo_cancellation,
                                     noise_suppression=e.noise_suppression, auto_gain=e.auto_gain)
    more = ""
    if e.echo_cancellation and e.recognizer_echo == "linear":
        from ..adapters.speex_aec import SpeexEchoCanceller

        more = "; the recognizer hears " + SpeexEchoCanceller(settings.audio.sample_rate_hz).describe().replace(
            "echo cancellation: ", "")
    if settings.session.trigger == "wake_word":
        from ..adapters.micro_wakeword import MicroWakeWordDetector

        more += f"; wake word {MicroWakeWordDetector(e.wake_word_model, probability_cutoff=e.wake_word_cutoff).name!r}"
    return canceller, more


async def check_ears(settings: Settings) -> Verdict:
    """Load the front end; with echo cancellation on, measure the echo path with a 0.8 s probe."""
    e = settings.ears
    if not (e.echo_cancellation or e.noise_suppression or e.auto_gain or settings.session.trigger == "wake_word"):
        return skip("[ears] all off: the listener hears the microphone as it is")
    try:
        canceller, more = await in_thread(_load, settings, name="doctor:ears")
    except ImportError as exc:
        return fail(f"the front end's library is missing ({exc.name})", "pip install livekit pymicro-wakeword "
                    "(both have wheels for x86_64 and aarch64)")
    except OSError as exc:
        if "speexdsp" in str(exc):
            return fail(f"[ears] recognizer_echo = \"linear\": {exc}",
                        "apt-get install libspeexdsp1, or set [ears] recognizer_echo = \"aec3\"")
        return fail(f"[ears]: {exc}", "check [ears] wake_word_model (a builtin name or a microWakeWord JSON path)")
    except (ValueError, RuntimeError) as exc:
        return fail(f"[ears]: {exc}", "check [ears] wake_word_model (a builtin name or a microWakeWord JSON path)")
    described = canceller.describe() + more
    if not e.echo_cancellation:
        return ok(described)
    from ..app.engines import build_microphone, build_speaker
    from ..audio.echo_probe import REACH_MS, measure_echo_path
    from ..audio.echo_reference import EchoReference
    from ..ports.audio import AudioDeviceError

    reference = EchoReference(settings.audio.sample_rate_hz)
    mic = build_microphone(settings)
    try:
        path = await measure_echo_path(mic, build_speaker(settings, reference=reference), reference, canceller)
    except (AudioDeviceError, TimeoutError) as exc:
        return warn(f"{described}; the echo path could not be measured ({exc})",
                    "check the audio-input and audio-output results above")
    finally:
        await mic.aclose()
    if path.delay_ms is None:
        return warn(f"{described}; the probe did not come back to the mic (speaker muted, or far from the mic)",
                    "unmute the speaker and run doctor again; a toy whose mic never hears its speaker needs no "
                    "canceller ([ears] echo_cancellation = false keeps barge-in off)")
    if not path.in_reach:
        where = "before" if path.delay_ms < 0 else "too long after"
        return fail(f"{described}; the echo arrives {where} its reference ({path.delay_ms:.0f} ms): it cannot be "
                    "cancelled", f"the device misreports its latency: set [audio] output_latency_ms, or use the "
                    f"ALSA `pulse`/`plughw:` devices; the canceller reaches 0–{REACH_MS:.0f} ms")
    erle = f", {path.erle_db:.0f} dB removed over the probe" if path.erle_db is not None else ""
    return ok(f"{described}; the echo comes back {path.delay_ms:.0f} ms after its reference at "
              f"{path.gain_db:+.0f} dB{erle}")
