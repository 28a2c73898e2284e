"""The wake word on microWakeWord models through `pymicro-wakeword` (Apache-2.0; the models ship in the wheel, which
has builds for x86_64 and aarch64).

The model is a setting: a builtin name (okay_nabu, hey_jarvis, hey_mycroft, alexa) or the path of a microWakeWord
JSON config beside its .tflite, so a maker can drop in their own word. No Chinese or "hey toy" model ships in a
package today; `pyopen-wakeword` has more, but its models are CC BY-NC-SA (not for a toy that is sold).

Cost: the TFLite Micro feature front end every 10 ms and one small streaming model run every 30 ms, ~0.25 % of one
core on 20 ms frames (`scripts/bench_wake_word.py` measures it, with misses, false wakes and latency).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["BUILTIN_MODELS", "REFRACTORY_S", "TUNED_VIEWS", "MicroWakeWordDetector"]

BUILTIN_MODELS = ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")
REFRACTORY_S = 1.0  # after a detection, detections in this much audio are ignored: one utterance wakes once
SAMPLE_RATE_HZ = 16000  # the only rate the front end and the models take
_FEATURE_SAMPLES = 160  # the front end yields one feature vector per 10 ms of audio


def _load(model: str) -> Any:
    """The pymicro_wakeword model for a builtin name or a JSON config path; ValueError (one line) otherwise."""
    from pymicro_wakeword import MicroWakeWord, Model

    if model in BUILTIN_MODELS:
        return MicroWakeWord.from_builtin(Model(model))
    choices = f"a builtin ({', '.join(BUILTIN_MODELS)}) or the path of a microWakeWord JSON config"
    path = Path(model).expanduser()
    if path.suffix.lower() != ".json" or not path.is_file():
        raise ValueError(f"wake word model {model!r} is not {choices}")
    # Checked here, before the library: a config without its keys raises a bare KeyError there, and a missing
    # .tflite reaches TensorFlow Lite's C API as a null model, which crashes the process instead of raising.
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        tflite = path.parent / config["model"]
        _ = (str(config["wake_word"]), float(config["micro"]["probability_cutoff"]),
             int(config["micro"]["sliding_window_size"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"wake word model {model!r}: not a microWakeWord JSON config ({exc!r})") from None
    if not tflite.is_file():
        raise ValueError(f"wake word model {model!r}: its model file {str(tflite)!r} is missing")
    return MicroWakeWord.from_config(path)


# The cutoff this toy uses for a builtin model when none is set, measured (scripts/bench_wake_word.py: 63 phrases
# in 7 voices, clean and under white/pink/babble noise 20 and 10 dB below, 441 trials; 30 min of English, Chinese
# and music-like audio for false wakes; docs/benchmarks.md, "Wake word"). okay_nabu's own 0.85 missed 38.5 % of
# the trials; 0.5 misses 18.8 % (the clean phrases 3 of 63) with still no false wake in the 30 min; 0.35 woke
# twice on speech. The others are left at their own: at 0.85 hey_mycroft missed 48 %, hey_jarvis 86 %.
# A maker's own model (a JSON path) always keeps its own cutoff unless [ears] wake_word_cutoff is set.
TUNED_CUTOFFS: dict[str, float] = {"okay_nabu": 0.5}

# The lower-pitched views (audio/wake_views.py) measured for a builtin model: (factor, the view's own cutoff).
# okay_nabu's view at 1.15 and 0.8 took the bench's misses from 63 to 35 of 441 with no false wake in the 30
# minutes; at 0.7 it woke once on Chinese speech, and offline a second view (0.87 or 1.3) saved 2-4 more only.
TUNED_VIEWS: dict[str, tuple[tuple[float, float], ...]] = {"okay_nabu": ((1.15, 0.8),)}


class MicroWakeWordDetector:
    """A `WakeWordDetector` on one microWakeWord model.

    `model`: a builtin name (`BUILTIN_MODELS`) or the path of a microWakeWord JSON config (its "model" file beside
    it). `probability_cutoff` (0..1, exclusive) overrides the model's own threshold (for a builtin, the one measured
    here, `TUNED_CUTOFFS`): higher wakes less often, on speech and on the phrase alike. Loading takes under a millisecond; the library must be installed
    (`pip install pymicro-wakeword`, ImportError otherwise).
    """

    def __init__(self, model: str = "okay_nabu", *, probability_cutoff: float | None = None) -> None:
        if probability_cutoff is not None and not 0.0 < probability_cutoff < 1.0:
            raise ValueError(f"wake word probability_cutoff {probability_cutoff} is not between 0 and 1")
        from pymicro_wakeword import MicroWakeWordFeatures

        self._model = _load(str(model))
        self._features = MicroWakeWordFeatures()
        self.name: str = str(self._model.wake_word)
        if probability_cutoff is None:
            probability_cutoff = TUNED_CUTOFFS.get(str(model), self._model.probability_cutoff)
        self.probability_cutoff: float = float(probability_cutoff)
        self._deaf_features = 0  # feature steps (10 ms each) of the refractory period still to go

    def process(self, pcm: bytes) -> bool:
        """Feed 16 kHz int16 mono audio of any length; True when the phrase ended inside it (once per utterance)."""
        detected = False
        for features in self._features.process_streaming(pcm):
            # The model is still run while deaf: its streaming state keeps up with the audio, so a phrase that
            # begins inside the refractory period and ends after it is heard whole.
            probability = self._model.process_streaming_prob(features)
            if self._deaf_features > 0:
                self._deaf_features -= 1
            elif probability is not None and probability > self.probability_cutoff:
                detected = True
                # The averaged probability stays above the cutoff for several model steps around the end of the
                # phrase, and the model's internal state still holds the phrase: start the model afresh (its
                # state and the sliding window) and ignore it for a second, so this utterance wakes only once.
                # The feature front end is left alone: we are inside its generator, and its noise estimate is
                # worth keeping.
                self._model.reset()
                self._deaf_features = int(REFRACTORY_S * SAMPLE_RATE_HZ) // _FEATURE_SAMPLES
        return detected

    def reset(self) -> None:
        """Forget everything heard so far (the front end, the model's streaming state and its sliding window, the
        refractory period): the detector then behaves exactly as a new one. A reload of the model, ~0.2 ms: its
        streaming state lives inside the TFLite interpreter, which no lighter call clears."""
        self._features.reset()
        self._model.reset()
        self._deaf_features = 0

    def close(self) -> None:
        """Release the interpreter now rather than when the detector is collected."""
        self._model.close()
