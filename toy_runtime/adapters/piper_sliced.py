"""A PiperVoice over a split voice (piper_split): the acoustic half gives the latent, the vocoder voices it in
slices, so its memory stays the same however long the sentence is."""

from __future__ import annotations

from typing import Any

from piper import PiperVoice

from toy_runtime.adapters.piper_split import SplitVoice, vocode_in_slices

__all__ = ["SlicedVocoderVoice"]


# a slice's own frames, at least: with less, most of each run would be context (the cost grows, not the memory)
MIN_SLICE_FRAMES = 8


class SlicedVocoderVoice(PiperVoice):
    """PiperVoice whose `session` is the voice's acoustic half; `vocoder` (the other half's session) voices a latent
    of more than `window_frames` frames in runs of at most `window_frames`: slices of `window_frames` − 2 ×
    `split.context_frames` own frames (at least MIN_SLICE_FRAMES), each with the context either side."""

    def __init__(self, *, config: Any, session: Any, vocoder: Any, split: SplitVoice, window_frames: int) -> None:
        super().__init__(session=session, config=config)
        self._vocoder = vocoder
        self._split = split
        self._chunk_frames = max(MIN_SLICE_FRAMES, window_frames - 2 * split.context_frames)

    def phoneme_ids_to_audio(self, phoneme_ids: Any, syn_config: Any = None, include_alignments: bool = False) -> Any:
        """Samples (float, piper's range) for one sentence's phoneme ids; no alignments (None) from a split voice."""
        # piper builds the inputs and runs `session`, the acoustic half: squeezed, its output is the latent
        # (channels × frames)
        latent = super().phoneme_ids_to_audio(phoneme_ids, syn_config)
        split = self._split
        audio = vocode_in_slices(lambda part: self._vocoder.run(None, {split.latent_name: part})[0], latent,
                                 hop_samples=split.hop_samples, chunk_frames=self._chunk_frames,
                                 context_frames=split.context_frames)
        return (audio, None) if include_alignments else audio
