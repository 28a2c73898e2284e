"""The wake word on microWakeWord models through `pymicro-wakeword` (Apache-2.0, models included; wheels for x86_64
and aarch64): ~0.2 % of a core here on 20 ms frames, the TFLite Micro front end and a small streaming model.

The model is a setting: a builtin name (okay_nabu, hey_jarvis, hey_mycroft, alexa) or the path of a microWakeWord
JSON config beside its .tflite, so a maker can drop in their own word. No Chinese or "hey toy" model ships in a
package today; `pyopen-wakeword` has more, but its models are CC BY-NC-SA (not for a toy that is sold).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILTIN_MODELS", "MicroWakeWordDetector"]

BUILTIN_MODELS = ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")
REFRACTORY_S = 1.5  # after a detection or a reset, detections in this much audio are ignored: one phrase wakes once


class MicroWakeWordDetector:
    """A `WakeWordDetector` on one microWakeWord model."""

    def __init__(self, model: str = "okay_nabu", *, probability_cutoff: float | None = None,
                 sample_rate_hz: int = 16000) -> None:
        from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

        if sample_rate_hz != 16000:
            raise ValueError(f"microWakeWord models take 16 kHz audio, not {sample_rate_hz} Hz")
        if model in BUILTIN_MODELS:
            self._model = MicroWakeWord.from_builtin(Model(model))
        else:
            path = Path(model).expanduser()
            if path.suffix != ".json" or not path.is_file():
                raise ValueError(f"wake word model {model!r}: neither a builtin ({', '.join(BUILTIN_MODELS)}) nor a "
                                 "microWakeWord JSON config file")
            try:
                self._model = MicroWakeWord.from_config(path)
            except (KeyError, ValueError, OSError) as exc:
                raise ValueError(f"wake word model {model!r}: {exc}") from None
        if probability_cutoff is not None:
            self._model.probability_cutoff = probability_cutoff
        self._features = MicroWakeWordFeatures()
        self.name: str = str(self._model.wake_word)
        self._deaf_samples = 0

    def process(self, pcm: bytes) -> bool:
        """Feed 16 kHz int16 audio; True when the phrase ended inside it."""
        detected = False
        for features in self._features.process_streaming(pcm):
            if self._model.process_streaming(features) and self._deaf_samples <= 0:
                detected = True
        self._deaf_samples -= len(pcm) // 2
        if detected:
            self.reset()
        return detected

    def reset(self) -> None:
        """Forget the phrase heard so far. The streaming model keeps ~1 s of context inside it that no call clears
        (measured: a reset detector woke again on the previous phrase), so it goes on hearing audio but is deaf
        for REFRACTORY_S, until that context has been replaced."""
        self._model._probabilities.clear()  # the sliding window of recent probabilities
        self._deaf_samples = int(REFRACTORY_S * 16000)
