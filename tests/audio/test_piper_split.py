"""The voice cut at its vocoder (piper_split): the same samples as one pass, in slices; the split is cached, made
again when cut short, and a voice that cannot be split is used whole with one warning."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from toy_runtime.adapters.piper_split import (SplitVoice, VoiceSplitError, cached_split, find_context_frames,
                                              slice_plan, split_voice, vocode_in_slices)
from toy_runtime.speech_out.sentence_gain import SentenceGain

if importlib.util.find_spec("onnx") is None:  # not imported here: the split runs in a child process
    pytest.skip("the onnx package is not installed", allow_module_level=True)
LONG = ("The sky looks blue because tiny bits of air scatter the blue light from the sun all around us, "
        "and that is why we see it everywhere.")


@pytest.fixture(scope="module")
def joe_split(tmp_path_factory) -> tuple[Path, SplitVoice]:
    from toy_runtime.adapters.piper_tts import default_voice_paths

    cache = tmp_path_factory.mktemp("split-cache")
    return cache, split_voice(default_voice_paths()[0], cache)


def pcm(pieces) -> np.ndarray:
    return np.frombuffer(b"".join(p.pcm for p in pieces), np.int16).astype(np.int32)


def test_the_joe_voice_splits_into_an_acoustic_half_and_a_vocoder(joe_split):
    cache, split = joe_split
    assert split.acoustic.parent.parent == cache
    assert split.acoustic.stat().st_size > 5 * split.vocoder.stat().st_size > 0  # most weights are acoustic
    assert split.hop_samples == 256  # the joe voice: 22050 Hz, 256 samples per latent frame
    assert split.context_frames == 10  # found by trying: joe's vocoder needs 10 frames either side
    assert 0.45 < split.reference_peak < 0.7  # joe's raw peaks: 0.28-0.81 over 54 sentences, 75th percentile ~0.6
    assert "onnx" not in sys.modules  # the split ran in a child: the runtime never holds onnx and the whole model


def test_a_split_voice_says_a_long_sentence_in_the_samples_of_one_pass_at_its_sentence_gain(joe_split):
    """Slice by slice (a short first slice, then growing ones up to the window) the split voice gives the whole
    voice's samples of one pass, at the level SentenceGain sets slice by slice."""
    from piper import SynthesisConfig

    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    cache, split = joe_split
    whole = PiperSynthesizer(deterministic=True, max_chars=0, trim=False)
    sliced = PiperSynthesizer(deterministic=True, max_chars=0, trim=False, split_cache=cache,
                              vocoder_window_frames=56, first_slice_frames=12, split_wait=True)
    try:
        assert whole.split is None and sliced.split == split
        voice = whole._voice
        quiet = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
        raw = np.asarray(voice.phoneme_ids_to_audio(voice.phonemes_to_ids(voice.phonemize(LONG)[0]), quiet))
        plan = slice_plan(len(raw) // 256, chunk_frames=36, context_frames=10, first_frames=12, min_frames=8)
        assert [end - start for start, end in plan[:4]] == [12, 24, 36, 36]
        gain = SentenceGain(split.reference_peak)
        expected = np.concatenate([gain.apply(raw[a * 256:b * 256]) for a, b in plan])
        expected = np.clip(expected * 32767.0, -32767, 32767).astype(np.int16).astype(np.int32)
        pieces = sliced.synthesize_blocking(LONG)
        got = pcm(pieces)
        assert len(pieces) == len(plan) > 10 and len(got) == len(expected) > 5 * 22050  # over five seconds
        assert int(np.abs(got - expected).max()) <= 2  # float rounding of sums taken in another order
        assert float(np.abs(got).max()) > 10000  # and it is speech, not two silences
    finally:
        whole.close()
        sliced.close()


def test_a_sentence_starts_to_sound_after_one_small_vocoder_run(joe_split):
    """The first piece of a sentence is handed on after the acoustic half and one run of the first slice with
    its context; the rest is voiced while it plays."""
    import asyncio

    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    cache, split = joe_split
    synth = PiperSynthesizer(deterministic=True, max_chars=0, split_cache=cache, first_slice_frames=12,
                             split_wait=True)
    runs: list[int] = []
    vocoder = synth._voice._vocoder

    class Measuring:
        def run(self, outputs, feed):
            runs.append(next(iter(feed.values())).shape[-1])
            return vocoder.run(outputs, feed)

    synth._voice._vocoder = Measuring()

    async def first_piece_and_the_rest():
        pieces = synth.synthesize("Here is a short answer for you.")
        first = await anext(pieces)
        runs_at_first = list(runs)
        rest = [piece async for piece in pieces]
        return first, runs_at_first, rest

    try:
        first, runs_at_first, rest = asyncio.run(first_piece_and_the_rest())
    finally:
        synth.close()
    assert runs_at_first == [12 + split.context_frames]  # one small run: 12 frames and their right context
    assert first.trimmed_ms > 0 and first.pcm  # the sentence's quiet start is trimmed from its first slice only
    assert len(rest) >= 2 and all(p.trimmed_ms == 0 for p in rest) and max(runs) <= 64  # never over the window


def test_freed_memory_is_given_back_before_each_slice_but_the_first(joe_split):
    """A sliced sentence trims the heap before every vocoder run but its first (the runs did not reuse each
    other's freed buffers); the first run, a sentence's first sound, is not delayed by a trim."""
    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    cache, _ = joe_split
    synth = PiperSynthesizer(deterministic=True, max_chars=0, split_cache=cache, split_wait=True)
    voice = synth._voice
    calls: list[str] = []
    voice._release_memory = lambda: calls.append("release")
    vocoder = voice._vocoder

    class Counting:
        def run(self, *args, **kwargs):
            calls.append("run")
            return vocoder.run(*args, **kwargs)

    voice._vocoder = Counting()
    try:
        synth.synthesize_blocking("Sure!")  # 43 frames: a first slice of 12, then the rest
        assert calls == ["run", "release", "run"]  # no trim before the first sound
        calls.clear()
        synth.synthesize_blocking(LONG)
        assert len(calls) > 10 and calls == ["run"] + ["release", "run"] * (len(calls) // 2)
    finally:
        synth.close()


def test_slices_without_enough_context_would_click_at_the_joins(joe_split):
    """The check that picks the context is a real one: too little context gives different samples."""
    import onnxruntime

    _, split = joe_split
    session = onnxruntime.InferenceSession(str(split.vocoder), providers=["CPUExecutionProvider"])
    vocode = lambda z: session.run(None, {split.latent_name: z})[0]  # noqa: E731
    latent = np.random.default_rng(1).standard_normal((192, 200)).astype(np.float32)
    one_pass = vocode_in_slices(vocode, latent, hop_samples=256, chunk_frames=0, context_frames=0)
    exact = vocode_in_slices(vocode, latent, hop_samples=256, chunk_frames=32, context_frames=split.context_frames)
    short = vocode_in_slices(vocode, latent, hop_samples=256, chunk_frames=32, context_frames=2)
    one_less = vocode_in_slices(vocode, latent, hop_samples=256, chunk_frames=32,
                                context_frames=split.context_frames - 1)
    scale = float(np.abs(one_pass).max())
    assert one_pass.shape == exact.shape == short.shape == one_less.shape == (200 * 256,)
    assert float(np.abs(exact - one_pass).max()) < 1e-4 * scale
    assert float(np.abs(short - one_pass).max()) > 1e-2 * scale
    assert float(np.abs(one_less - one_pass).max()) > 1e-4 * scale  # the least context: one frame less clicks
    assert find_context_frames(vocode, 192, 256) == split.context_frames


def test_the_split_is_made_once_and_made_again_when_cut_short(joe_split, tmp_path):
    from toy_runtime.adapters.piper_tts import default_voice_paths

    cache, split = joe_split
    record = split.acoustic.parent / "split.json"
    stamp = record.stat().st_mtime_ns
    assert split_voice(default_voice_paths()[0], cache) == split  # from the cache: nothing rewritten
    assert record.stat().st_mtime_ns == stamp

    copy = tmp_path / "cache"
    abandoned = copy / f"{split.acoustic.parent.name}.999999999.tmp"  # a split cut off with its process
    (abandoned / "acoustic.onnx").parent.mkdir(parents=True)
    (abandoned / "acoustic.onnx").write_bytes(b"half a model")
    again = split_voice(default_voice_paths()[0], copy)
    assert not abandoned.exists()
    (again.acoustic.parent / "split.json").write_text(json.dumps({"format": 1}))  # a power loss mid-write
    with open(again.vocoder, "r+b") as f:
        f.truncate(1000)
    remade = split_voice(default_voice_paths()[0], copy)
    assert remade.vocoder.stat().st_size == split.vocoder.stat().st_size
    assert [p.name for p in copy.iterdir()] == [remade.acoustic.parent.name]  # no leftovers beside it


def test_a_voice_that_is_not_piper_vits_is_used_whole_with_one_warning(joe_split, tmp_path, caplog):
    """The vocoder half on its own is an ONNX graph without piper's encoder: it cannot be split again."""
    from toy_runtime.adapters.piper_tts import PiperSynthesizer, default_voice_paths

    _, split = joe_split
    with pytest.raises(VoiceSplitError, match="not a Piper VITS voice"):
        split_voice(split.vocoder, tmp_path / "cache")

    voice = tmp_path / "voice.onnx"
    voice.write_bytes(split.vocoder.read_bytes())
    with caplog.at_level(logging.WARNING, logger="toy_runtime.adapters.piper_tts"):
        synth = PiperSynthesizer(voice, default_voice_paths()[1], split_cache=tmp_path / "c2", split_wait=True)
    synth.close()
    assert synth.split is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not a Piper VITS voice" in warnings[0]


def test_without_a_cached_split_the_voice_speaks_whole_at_once_and_is_split_in_the_background(tmp_path):
    """The runtime never waits for the split: the first start speaks with the whole voice, the next one sliced."""
    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    cache = tmp_path / "voices"
    first = PiperSynthesizer(deterministic=True, split_cache=cache)
    try:
        assert first.split is None and first._splitting is not None
        assert first.synthesize_blocking("Hello there.")[0].pcm  # speaking while the split is being made
        assert first._splitting.wait(timeout=120) == 0
    finally:
        first.close()
    second = PiperSynthesizer(deterministic=True, split_cache=cache)
    try:
        assert second.split is not None and second._splitting is None
    finally:
        second.close()


@pytest.mark.slow  # a child process (onnx imported there)
def test_the_split_child_says_in_one_line_why_a_file_cannot_be_split(tmp_path):
    import subprocess

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model at all")
    done = subprocess.run([sys.executable, "-m", "toy_runtime.adapters.piper_split", str(broken), str(tmp_path / "c"),
                           "--background"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toy-runtime: the voice stays whole (not split: "), done.stderr
    assert not list((tmp_path / "c").glob("*"))  # nothing half-made left behind


def test_copies_of_a_voice_in_two_places_keep_their_own_splits(joe_split, tmp_path):
    """Two venvs on one machine, each with its copy of the voice, share the user's cache without evicting each
    other (each start would otherwise split again); a changed file replaces only its own split."""
    import shutil

    from toy_runtime.adapters.piper_tts import default_voice_paths

    cache = tmp_path / "voices"
    shutil.copytree(joe_split[0], cache)  # the first venv's split, already made (a split costs ~10 s of a core)
    copy = tmp_path / "venv2" / "en_US-joe-medium.onnx"
    copy.parent.mkdir()
    shutil.copyfile(default_voice_paths()[0], copy)
    first = split_voice(default_voice_paths()[0], cache)
    assert first.acoustic.parent.parent == cache and first.context_frames == joe_split[1].context_frames
    second = split_voice(copy, cache, config_path=default_voice_paths()[1])
    assert first.acoustic.parent != second.acoustic.parent
    assert cached_split(default_voice_paths()[0], cache) == first and cached_split(copy, cache) == second

    os.utime(copy, ns=(copy.stat().st_atime_ns, copy.stat().st_mtime_ns + 1_000_000_000))  # the copy is updated
    assert cached_split(copy, cache) is None
    third = split_voice(copy, cache, config_path=default_voice_paths()[1])
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.acoustic.parent.name, third.acoustic.parent.name])
