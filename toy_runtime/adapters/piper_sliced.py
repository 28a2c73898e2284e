"""A PiperVoice over a split voice (piper_split): the acoustic half gives a sentence's latent, the vocoder voices it
in slices that are handed on one by one. The first slice is short, so a sentence starts to sound after a small
vocoder run, and no run is larger than the window, so the vocoder's memory stays the same however long the
sentence is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
from piper import PiperVoice

from toy_runtime.adapters.piper_split import SplitVoice, slice_plan, vocode_slices
from toy_runtime.speech_out.sentence_gain import SentenceGain

__all__ = ["MIN_SLICE_FRAMES", "SlicedVocoderVoice", "VoicedSlice"]


# a slice's own frames, at least: with less, most of each run would be context (the cost grows, not the memory)
MIN_SLICE_FRAMES = 8


@dataclass(frozen=True)
class VoicedSlice:
    """A slice of one sentence's sound, ready to play (float32 in [-1, 1])."""

    samples: np.ndarray
    starts_sentence: bool  # the sentence's first slice (its leading silence is the sentence's)


class SlicedVocoderVoice(PiperVoice):
    """PiperVoice whose `session` is the voice's acoustic half and `vocoder` the other half's session.

    `voice_slices` gives a text's sound slice by slice: each sentence's first slice has `first_slice_frames` latent
    frames (0: a whole window), each next one twice as many, up to `window_frames` − 2 × `split.context_frames`
    (at least MIN_SLICE_FRAMES); every run carries the context either side, so the slices join into the samples of
    one pass. The level is piper's per-sentence normalization made for slices (SentenceGain, the split's
    reference peak). `release_memory` (e.g. glibc's malloc_trim) is called before every vocoder run of a sentence
    but its first, which is the one a listener waits for."""

    def __init__(self, *, config: Any, session: Any, vocoder: Any, split: SplitVoice, window_frames: int,
                 first_slice_frames: int = 0, release_memory: Callable[[], object] | None = None) -> None:
        super().__init__(session=session, config=config)
        self._vocoder = vocoder
        self._split = split
        self._chunk_frames = max(MIN_SLICE_FRAMES, window_frames - 2 * split.context_frames)
        self._first_frames = max(MIN_SLICE_FRAMES, first_slice_frames) if first_slice_frames > 0 else 0
        self._release_memory = release_memory

    def voice_slices(self, text: str, syn_config: Any) -> Iterator[VoicedSlice]:
        """The sound of `text`, sentence by sentence and slice by slice (a generator: each vocoder run happens
        when its slice is asked for)."""
        split = self._split
        for phonemes in self.phonemize(text):
            if not phonemes:
                continue
            # piper builds the inputs and runs `session`, the acoustic half: squeezed, its output is the latent
            # (channels × frames)
            latent = np.asarray(super().phoneme_ids_to_audio(self.phonemes_to_ids(phonemes), syn_config))
            latent = latent.reshape(latent.shape[0], -1)
            plan = slice_plan(latent.shape[-1], chunk_frames=self._chunk_frames, context_frames=split.context_frames,
                              first_frames=self._first_frames, min_frames=MIN_SLICE_FRAMES)
            # piper's normalize_audio off: the raw level, only kept under full scale
            gain = SentenceGain(split.reference_peak if syn_config.normalize_audio else 1.0, volume=syn_config.volume)
            runs = 0

            def vocode(part: Any) -> Any:
                nonlocal runs
                if runs and self._release_memory is not None:
                    # Each run's freed buffers stay resident in glibc's heap, and the next run did not reuse
                    # them: the acoustic half's 5-8 MB and the previous slice's ~15 MB lay under every run, so a
                    # sentence peaked at ~+26 MB (piper alone, 48-frame windows). Given back before each run
                    # (~1 ms), the peak is one run's: +13-16 MB (measured). Not before the first run: that is
                    # the one the listener waits for, and it is small.
                    self._release_memory()
                runs += 1
                return self._vocoder.run(None, {split.latent_name: part})[0]

            slices = vocode_slices(vocode, latent, plan, hop_samples=split.hop_samples,
                                   context_frames=split.context_frames)
            for index, raw in enumerate(slices):
                yield VoicedSlice(samples=gain.apply(raw), starts_sentence=index == 0)

    def phoneme_ids_to_audio(self, phoneme_ids: Any, syn_config: Any = None, include_alignments: bool = False) -> Any:
        """Not available (so neither is piper's `synthesize`): a split voice's sound comes slice by slice."""
        raise NotImplementedError("a split voice is voiced with voice_slices()")
