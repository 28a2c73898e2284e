"""A PiperVoice over a split voice (piper_split): the acoustic half gives the latent, the vocoder voices it in
slices, so its memory stays the same however long the sentence is."""

from __future__ import annotations

from typing import Any, Callable

from piper import PiperVoice

from toy_runtime.adapters.piper_split import SplitVoice, vocode_in_slices

__all__ = ["SlicedVocoderVoice"]


# a slice's own frames, at least: with less, most of each run would be context (the cost grows, not the memory)
MIN_SLICE_FRAMES = 8


class SlicedVocoderVoice(PiperVoice):
    """PiperVoice whose `session` is the voice's acoustic half; `vocoder` (the other half's session) voices a latent
    of more than `window_frames` frames in runs of at most `window_frames`: slices of `window_frames` − 2 ×
    `split.context_frames` own frames (at least MIN_SLICE_FRAMES), each with the context either side.
    `release_memory` (e.g. glibc's malloc_trim) is called before each run of a latent voiced in slices."""

    def __init__(self, *, config: Any, session: Any, vocoder: Any, split: SplitVoice, window_frames: int,
                 release_memory: Callable[[], object] | None = None) -> None:
        super().__init__(session=session, config=config)
        self._vocoder = vocoder
        self._split = split
        self._chunk_frames = max(MIN_SLICE_FRAMES, window_frames - 2 * split.context_frames)
        self._release_memory = release_memory

    def phoneme_ids_to_audio(self, phoneme_ids: Any, syn_config: Any = None, include_alignments: bool = False) -> Any:
        """Samples (float, piper's range) for one sentence's phoneme ids; no alignments (None) from a split voice."""
        # piper builds the inputs and runs `session`, the acoustic half: squeezed, its output is the latent
        # (channels × frames)
        latent = super().phoneme_ids_to_audio(phoneme_ids, syn_config)
        split = self._split
        sliced = latent.shape[-1] > self._chunk_frames + 2 * split.context_frames
        release = self._release_memory if sliced else None

        def vocode(part: Any) -> Any:
            if release is not None:
                # Each run's freed buffers stay resident in the heap, and the next run did not reuse them: the
                # acoustic half's 5-8 MB and the previous slice's ~15 MB lay under every run, so a sentence
                # peaked at ~+26 MB (piper alone, "Sure! Here is a short answer for you.", 48-frame windows).
                # Given back before each run (~1 ms), the peak is one run's: +13-16 MB (measured). A piece voiced
                # in one run is not trimmed: it is often the first sound of an answer, and trimming before it
                # lowered no peak the voice bench saw.
                release()
            return self._vocoder.run(None, {split.latent_name: part})[0]

        audio = vocode_in_slices(vocode, latent, hop_samples=split.hop_samples,
                                 chunk_frames=self._chunk_frames if sliced else 0,
                                 context_frames=split.context_frames)
        return (audio, None) if include_alignments else audio
