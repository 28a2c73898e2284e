"""A Piper voice cut in two at its vocoder, so that a long sentence is voiced in bounded memory.

A Piper (VITS) voice is one ONNX graph: phoneme ids → acoustic latent (text encoder, durations, flow) → HiFi-GAN
vocoder → samples. The vocoder's tensors grow with the sound: on the joe voice ~0.22 MB per latent frame (256
samples, 11.6 ms), +58 MB for a 50-character clause, measured. Cut at the vocoder's input, the latent can be voiced
in slices. The vocoder is convolutional, so a slice that carries at least its receptive field as context on either
side gives the same samples as one pass (within 1e-6 of full scale on joe, measured); `context_frames` is found by
trying, on the voice itself, when the split is made.

The split is made once per voice in a child process: it needs the `onnx` package and ~300 MB for a moment, which
the runtime should never hold. The runtime does not wait for it: without a cached split it speaks with the whole
voice and starts the split in the background (`start_split`), to be used from its next start. The two halves are
cached beside a small JSON record written last, so a split cut short (a power loss) is made again instead of
loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToyError

__all__ = ["SplitVoice", "VoiceSplitError", "cached_split", "find_context_frames", "slice_plan", "split_voice",
           "start_split", "vocode_in_slices", "vocode_slices"]

# piper's VITS export keeps PyTorch's parameter names: the vocoder starts with this convolution
_VOCODER_FIRST_WEIGHT = "dec.conv_pre.weight"
_RECORD = "split.json"
_FORMAT = 3  # 3: + reference_peak; 2: the least context, frame by frame (1 tried 4, 8, 12…: 12 where 10 joins)
_MAX_CONTEXT = 64
_SAME_WITHIN = 1e-4  # of full scale: float32 convolutions summed in another order differ by ~1e-6
# What the voice says to find its reference peak: short and long, statements, questions and exclamations.
_CALIBRATION = ("Sure!", "Okay.", "Hello there!", "Yes!", "Twelve.", "What a lovely name.", "Bananas are yellow.",
                "Let's play a game!", "Do you want to hear a story?", "I set a reminder for five o'clock.",
                "Cats like to sleep in warm sunny spots.", "Here is a short answer for you.",
                "Elephants are the biggest animals that walk on land.",
                "The moon is about three hundred eighty thousand kilometers away.")
_REFERENCE_PERCENTILE = 75


class VoiceSplitError(ToyError):
    """The voice could not be split (not a Piper VITS graph, `onnx` missing, no space): use it whole."""

    code = "voice_split_failed"


@dataclass(frozen=True)
class SplitVoice:
    """The two halves of one voice and how to join the vocoder's slices."""

    acoustic: Path
    vocoder: Path
    latent_name: str  # the vocoder's input: the acoustic half's output
    hop_samples: int  # samples per latent frame
    context_frames: int  # latent frames of context either side of a slice for an exact join
    reference_peak: float  # the voice's loudest raw sample in most sentences (speech_out/sentence_gain.py)


def cached_split(model_path: str | Path, cache_dir: str | Path) -> SplitVoice | None:
    """The split of `model_path` cached in `cache_dir`, or None when there is none (or only a broken one)."""
    return _read_record(_target(Path(model_path), Path(cache_dir)))


def split_voice(model_path: str | Path, cache_dir: str | Path, *, config_path: str | Path | None = None,
                timeout_s: float = 300.0) -> SplitVoice:
    """The cached split of `model_path`, made first (in a child process, waited for) if there is none.
    `config_path`: the voice's .onnx.json (None: beside the model), to find its reference peak.

    Raises VoiceSplitError with the reason when the voice cannot be split.
    """
    model_path, cache_dir = Path(model_path), Path(cache_dir)
    cached = cached_split(model_path, cache_dir)
    if cached is not None:
        return cached
    try:
        done = subprocess.run(_child_command(model_path, cache_dir, config_path), capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        raise VoiceSplitError(f"could not split {model_path.name}: {exc}") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise VoiceSplitError(lines[-1] if lines else f"the split exited with {done.returncode}")
    split = cached_split(model_path, cache_dir)
    if split is None:
        raise VoiceSplitError(f"the split of {model_path.name} left no usable record in {cache_dir}")
    return split


def start_split(model_path: str | Path, cache_dir: str | Path, *,
                config_path: str | Path | None = None) -> subprocess.Popen:
    """Make the split in a child process at the lowest CPU priority, not waited for: the runtime speaks with the
    whole voice meanwhile and finds the split at its next start. The child's one line on failure goes to this
    process's stderr (the journal). It runs in a session of its own, so it outlives a runtime that stops first
    (a short `demo`, a test) instead of being cut off and begun again each time; stopping the service ends it with
    the rest of the unit's cgroup, and a half-made split is cleared by the next one."""
    return subprocess.Popen([*_child_command(Path(model_path), Path(cache_dir), config_path), "--background"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


def _target(model_path: Path, cache_dir: Path) -> Path:
    """`piper-<stem>-<where>-<which>`: one entry per voice file, so venvs that each hold a copy of a voice share
    the cache without evicting each other's splits; <which> changes when that file does."""
    return cache_dir / f"{_family(model_path)}{_version_key(model_path)}"


def _family(model_path: Path) -> str:
    """The names of every split of the file at this path, whatever its version."""
    where = hashlib.sha256(str(model_path.resolve()).encode()).hexdigest()[:8]
    return f"piper-{model_path.stem}-{where}-"


def _version_key(model_path: Path) -> str:
    st = model_path.stat()
    return hashlib.sha256(f"{_FORMAT}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]


def _child_command(model_path: Path, cache_dir: Path, config_path: str | Path | None) -> list[str]:
    config = [] if config_path is None else [f"--config={config_path}"]
    return [sys.executable, "-m", __name__, str(model_path), str(cache_dir), *config]


def _publish_split(model_path: Path, cache_dir: Path, config_path: Path) -> None:
    """The child's work: build both halves beside the cache entry, then move them in at once."""
    target = _target(model_path, cache_dir)
    if _read_record(target) is not None:
        return
    _remove_abandoned(cache_dir, _family(model_path))
    building = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(building, ignore_errors=True)
    try:
        building.mkdir(parents=True)
        _make_split(model_path, building, config_path)
        if _read_record(target) is None:  # else another process finished the same split first: keep its files
            shutil.rmtree(target, ignore_errors=True)
            os.replace(building, target)
    except OSError as exc:
        raise VoiceSplitError(f"could not split {model_path.name}: {exc}") from exc
    finally:
        shutil.rmtree(building, ignore_errors=True)
    for old in cache_dir.glob(f"{_family(model_path)}*"):  # earlier versions of this very file
        if old != target and not old.name.endswith(".tmp"):
            shutil.rmtree(old, ignore_errors=True)


def _remove_abandoned(cache_dir: Path, prefix: str) -> None:
    """Half-made splits (`<name>.<pid>.tmp`, ~60 MB each) whose process is gone: a power loss or a kill mid-split."""
    for partial in cache_dir.glob(f"{prefix}*.tmp"):
        pid = partial.name.rsplit(".", 2)[-2]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(partial, ignore_errors=True)
        except (ValueError, PermissionError):  # not our name, or another user's live process
            continue


def _read_record(directory: Path) -> SplitVoice | None:
    try:
        record = json.loads((directory / _RECORD).read_text(encoding="utf-8"))
        split = SplitVoice(acoustic=directory / "acoustic.onnx", vocoder=directory / "vocoder.onnx",
                           latent_name=str(record["latent_name"]), hop_samples=int(record["hop_samples"]),
                           context_frames=int(record["context_frames"]),
                           reference_peak=float(record["reference_peak"]))
        sizes = record["sizes"]
        if record.get("format") != _FORMAT or any(
                getattr(split, half).stat().st_size != int(sizes[half]) for half in ("acoustic", "vocoder")):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return split


def find_context_frames(run_vocoder, channels: int, hop_samples: int, *, chunk_frames: int = 32) -> int:
    """The least context (latent frames either side) with which `run_vocoder`'s slices join into the samples of
    one pass over the same latent; `run_vocoder` maps a (1, channels, frames) float32 latent to `hop_samples`
    samples a frame.

    Raises VoiceSplitError when even _MAX_CONTEXT frames do not join exactly.
    """
    import bisect

    import numpy as np

    frames = 4 * chunk_frames + 2 * _MAX_CONTEXT
    latent = np.random.default_rng(0).standard_normal((1, channels, frames)).astype(np.float32)
    whole = np.asarray(run_vocoder(latent)).reshape(-1)
    scale = float(np.abs(whole).max()) or 1.0

    def joins(context: int) -> bool:
        joined = vocode_in_slices(run_vocoder, latent[0], hop_samples=hop_samples, chunk_frames=chunk_frames,
                                  context_frames=context)
        return joined.shape == whole.shape and float(np.abs(joined - whole).max()) <= _SAME_WITHIN * scale

    # A slice's samples depend on the latent within the vocoder's receptive field only: every context at least
    # that wide joins and every narrower one does not, so the least one can be bisected (6 tries, not 64).
    tries = range(1, _MAX_CONTEXT + 1)
    found = bisect.bisect_left(tries, True, key=joins)
    if found == len(tries):
        raise VoiceSplitError(f"the vocoder's slices never join exactly (context up to {_MAX_CONTEXT} frames)")
    return tries[found]


def slice_plan(frames: int, *, chunk_frames: int, context_frames: int, first_frames: int = 0,
               min_frames: int = 1) -> list[tuple[int, int]]:
    """The (start, end) latent frames of each slice of a `frames`-frame latent; one slice when it fits in one run
    (`chunk_frames` + 2 × `context_frames`, or `chunk_frames` <= 0).

    `first_frames` > 0: the first slice has that many frames and each next one twice as many as the one before, up
    to `chunk_frames`, so the first sound comes from a short run and each run has the sound of the slices before it
    to hide behind. A rest shorter than `min_frames` joins the slice before it when that stays within `chunk_frames`.
    """
    if chunk_frames <= 0:
        return [(0, frames)]
    one_run = first_frames + context_frames if first_frames > 0 else chunk_frames + 2 * context_frames
    if frames <= one_run:
        return [(0, frames)]
    plan: list[tuple[int, int]] = []
    start, size = 0, (min(first_frames, chunk_frames) if first_frames > 0 else chunk_frames)
    while start < frames:
        end = min(frames, start + size)
        if 0 < frames - end < min_frames and frames - start <= chunk_frames:
            end = frames
        plan.append((start, end))
        start, size = end, min(chunk_frames, 2 * size)
    return plan


def vocode_slices(vocode, latent, plan, *, hop_samples: int, context_frames: int):
    """Samples for `latent` (channels × frames) from `vocode` (a (1, channels, n) latent → n × hop samples), one
    array per (start, end) slice of `plan` (slice_plan), each voiced with `context_frames` of its neighbours and cut
    back to its own frames (a generator: a slice is voiced when it is asked for)."""
    import numpy as np

    frames = latent.shape[-1]
    for start, end in plan:
        lo, hi = max(0, start - context_frames), min(frames, end + context_frames)
        part = latent[None] if (lo, hi) == (0, frames) else np.ascontiguousarray(latent[None, :, lo:hi])
        audio = np.asarray(vocode(part)).reshape(-1)
        yield audio[(start - lo) * hop_samples:(end - lo) * hop_samples].copy()


def vocode_in_slices(vocode, latent, *, hop_samples: int, chunk_frames: int, context_frames: int):
    """All samples for `latent` at once, voiced in slices of `chunk_frames` (vocode_slices; 0 = one run)."""
    import numpy as np

    plan = slice_plan(latent.shape[-1], chunk_frames=chunk_frames, context_frames=context_frames)
    return np.concatenate(list(vocode_slices(vocode, latent, plan, hop_samples=hop_samples,
                                             context_frames=context_frames)))


def reference_peak(voice) -> float:
    """The voice's reference peak: the 75th percentile of its loudest raw sample over _CALIBRATION's sentences
    (noise off). `voice` is a whole piper.PiperVoice; its raw samples are before piper's normalization."""
    import numpy as np
    from piper import SynthesisConfig

    quiet = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    peaks = []
    for text in _CALIBRATION:
        for phonemes in voice.phonemize(text):
            if phonemes:
                audio = voice.phoneme_ids_to_audio(voice.phonemes_to_ids(phonemes), quiet)
                peaks.append(float(np.abs(np.asarray(audio)).max()))
    peak = float(np.percentile(peaks, _REFERENCE_PERCENTILE)) if peaks else 0.0
    if not peak > 1e-4:
        raise VoiceSplitError("the voice said nothing audible for its calibration sentences")
    return peak


def _make_split(model_path: Path, out_dir: Path, config_path: Path) -> None:
    """The child process's work: write both halves and, last, the record."""
    try:
        import onnx
        import onnx.utils
    except ImportError as exc:
        raise VoiceSplitError(f"the onnx package is needed to split a voice (pip install onnx): {exc}") from exc
    import numpy as np
    import onnxruntime

    model = onnx.load(str(model_path))
    graph = model.graph
    firsts = [node for node in graph.node if node.op_type == "Conv" and _VOCODER_FIRST_WEIGHT in node.input]
    inputs = [i.name for i in graph.input]
    outputs = [o.name for o in graph.output]
    if len(firsts) != 1 or firsts[0].input[0] in inputs:
        raise VoiceSplitError(f"{model_path.name} is not a Piper VITS voice (no {_VOCODER_FIRST_WEIGHT} after an "
                              "acoustic model)")
    latent_name = firsts[0].input[0]
    weight = next((t for t in graph.initializer if t.name == _VOCODER_FIRST_WEIGHT), None)
    if weight is None or len(weight.dims) != 3:
        raise VoiceSplitError(f"{model_path.name}: {_VOCODER_FIRST_WEIGHT} is not a 1-D convolution's weight")
    channels = int(weight.dims[1])  # (out, in, kernel): the latent's channels
    extractor = onnx.utils.Extractor(model)
    onnx.save(extractor.extract_model(inputs, [latent_name]), str(out_dir / "acoustic.onnx"))
    onnx.save(extractor.extract_model([latent_name], outputs[:1]), str(out_dir / "vocoder.onnx"))
    del model, extractor

    session = onnxruntime.InferenceSession(str(out_dir / "vocoder.onnx"), providers=["CPUExecutionProvider"])
    probe = session.run(None, {latent_name: np.zeros((1, channels, 8), np.float32)})[0]
    hop = int(probe.size // 8)
    context = find_context_frames(lambda latent: session.run(None, {latent_name: latent})[0], channels, hop)
    del session
    peak = reference_peak(_whole_voice(model_path, config_path))
    sizes = {half: (out_dir / f"{half}.onnx").stat().st_size for half in ("acoustic", "vocoder")}
    record = {"format": _FORMAT, "source": str(model_path), "latent_name": latent_name, "hop_samples": hop,
              "context_frames": context, "reference_peak": round(peak, 6), "sizes": sizes}
    partial = out_dir / f"{_RECORD}.tmp"
    partial.write_text(json.dumps(record, indent=1), encoding="utf-8")
    os.replace(partial, out_dir / _RECORD)


def _whole_voice(model_path: Path, config_path: Path):
    """The voice in one piece (piper.PiperVoice), to hear its raw samples."""
    from piper import PiperVoice

    if not config_path.is_file():
        raise VoiceSplitError(f"the voice's config {config_path} is missing")
    return PiperVoice.load(model_path, config_path=config_path)


def main(argv: list[str] | None = None) -> int:
    """`python -m toy_runtime.adapters.piper_split MODEL.onnx CACHE_DIR [--config=MODEL.onnx.json] [--background]`
    (what `split_voice` and `start_split` run): exit 0 with the split in CACHE_DIR, 1 with one line on stderr
    saying why not."""
    args = sys.argv[1:] if argv is None else argv
    background = "--background" in args
    configs = [a.split("=", 1)[1] for a in args if a.startswith("--config=")]
    args = [a for a in args if a != "--background" and not a.startswith("--config=")]
    if len(args) != 2 or len(configs) > 1:
        print("usage: python -m toy_runtime.adapters.piper_split MODEL.onnx CACHE_DIR [--config=MODEL.onnx.json] "
              "[--background]", file=sys.stderr)
        return 2
    if background:
        os.nice(19)  # the runtime beside it answers a child: it comes first
    model = Path(args[0])
    config = Path(configs[0]) if configs else Path(f"{model}.json")
    try:
        _publish_split(model, Path(args[1]), config)
    except Exception as exc:  # onnx's parser, numpy, a full disk: one line, and the voice stays whole
        print(f"toy-runtime: the voice stays whole (not split: {exc})" if background else str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
