"""Test signals and measurements for the rig: a chirp burst played through the runtime's speaker adapter, captured
with its mic adapter, found by cross-correlation; levels in dBFS, latency from the adapters' timestamps."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import numpy as np

from toy_runtime.ports.audio import AudioFrame

RATE = 16000
FLOOR_DBFS = -120.0  # what digital silence (or a level below it) reads as


def chirp(*, rate: int = RATE, seconds: float = 0.3, f0: float = 400.0, f1: float = 3000.0,
          amplitude: float = 0.5) -> np.ndarray:
    """A linear sweep f0→f1 with 20 ms raised-cosine edges, int16. In the band every small speaker and a 16 kHz
    mic both pass; a sweep correlates to one sharp peak (a pure tone would give many)."""
    t = np.arange(int(rate * seconds)) / rate
    x = np.sin(2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / seconds * t * t))
    edge = int(rate * 0.02)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, edge))
    x[:edge] *= ramp
    x[-edge:] *= ramp[::-1]
    return (x * amplitude * 32767).astype("<i2")


def dbfs(samples: np.ndarray) -> float:
    """RMS level in dBFS (0 dBFS = an RMS of 32768, int16 full scale); silence reads FLOOR_DBFS."""
    if len(samples) == 0:
        return FLOOR_DBFS
    rms = float(np.sqrt(np.mean(np.square(samples.astype(np.float64)))))
    return max(FLOOR_DBFS, 20 * np.log10(rms / 32768.0)) if rms > 0 else FLOOR_DBFS


def frame_levels(pcm: np.ndarray, rate: int = RATE, frame_ms: int = 20) -> np.ndarray:
    """dBFS of each `frame_ms` block."""
    n = rate * frame_ms // 1000
    return np.array([dbfs(pcm[i : i + n]) for i in range(0, len(pcm) - n + 1, n)])


@dataclass(frozen=True)
class Shot:
    """One burst through the loop."""

    burst_dbfs: float  # RMS level of the captured burst
    floor_dbfs: float  # RMS level of the capture before the burst was written
    latency_ms: float  # first burst sample written to the speaker → the same sample captured by the mic
    peak_ratio: float  # correlation peak / median correlation (how clearly the burst stands out)
    captured_s: float

    @property
    def snr_db(self) -> float:
        return self.burst_dbfs - self.floor_dbfs

    def __str__(self) -> str:
        return (f"burst {self.burst_dbfs:.1f} dBFS, floor {self.floor_dbfs:.1f} dBFS, "
                f"SNR {self.snr_db:.1f} dB, latency {self.latency_ms:.1f} ms, peak/median {self.peak_ratio:.0f}")


class FrameTape:
    """Keeps every frame a source delivers (the test's bounded capture: a few seconds at most)."""

    def __init__(self) -> None:
        self.frames: list[AudioFrame] = []

    async def record(self, source) -> None:
        async for frame in source:
            self.frames.append(frame)

    def since(self, t: float) -> list[AudioFrame]:
        return [f for f in self.frames if f.end_s > t]

    @staticmethod
    def pcm(frames: list[AudioFrame]) -> np.ndarray:
        return np.frombuffer(b"".join(f.pcm for f in frames), dtype="<i2")


def locate(frames: list[AudioFrame], reference: np.ndarray) -> tuple[int, float, float]:
    """(sample index of the best match, its capture time, peak/median ratio) of `reference` in `frames`."""
    pcm = FrameTape.pcm(frames).astype(np.float64)
    if len(pcm) < len(reference):
        raise AssertionError(f"captured only {len(pcm)} samples, shorter than the {len(reference)}-sample burst")
    corr = np.abs(np.correlate(pcm, reference.astype(np.float64), mode="valid"))
    index = int(np.argmax(corr))
    ratio = float(corr[index] / (np.median(corr) + 1e-9))
    per = frames[0].samples
    frame = frames[min(index // per, len(frames) - 1)]
    return index, frame.timestamp_s + (index - (index // per) * per) / frame.sample_rate_hz, ratio


async def shoot(mic, speaker, burst: np.ndarray, *, lead_s: float = 0.4, tail_s: float = 0.5,
                rate: int = RATE) -> Shot:
    """Play `burst` through `speaker` (an AudioSink) while `mic` (an AudioSource) captures; both are opened
    and closed here. The floor is the capture during `lead_s` of the speaker playing silence."""
    tape = FrameTape()
    await mic.start()
    recorder = asyncio.create_task(tape.record(mic), name="hil:capture")
    try:
        await speaker.start()
        try:
            await asyncio.sleep(lead_s)
            answer = "hil-burst"
            first = speaker.first_sample(answer)
            await speaker.play(burst.tobytes(), rate, answer)
            await speaker.drain()
            written_at = await first
            await asyncio.sleep(tail_s)
        finally:
            await speaker.aclose()
    finally:
        await mic.aclose()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(recorder, 5)
    assert written_at is not None, "the speaker never started the burst"
    frames = tape.frames
    assert frames, "the mic delivered no audio at all"
    index, heard_at, ratio = locate(frames, burst)
    pcm = FrameTape.pcm(frames)
    before = FrameTape.pcm([f for f in frames[5:] if f.end_s < written_at])  # skip stream start-up
    return Shot(burst_dbfs=dbfs(pcm[index : index + len(burst)]), floor_dbfs=dbfs(before),
                latency_ms=(heard_at - written_at) * 1000.0, peak_ratio=ratio, captured_s=len(pcm) / rate)


async def stop_runtime(proc) -> None:
    """Stop a `toy-runtime` child as systemd would: SIGTERM, 20 s to finish, then SIGKILL."""
    import asyncio
    import signal

    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def start_run(rig, state_dir, llm_url: str, log, env_extra: dict[str, str] | None = None):
    """`toy-runtime run` as a child process on the rig, answering through `llm_url`, its output into `log`
    (`env_extra`: more TOY_* settings)."""
    import sys

    from toy_runtime.testing.services import child_env

    env = child_env()
    env.update(rig.runtime_env())
    env.update({"TOY_STATE_DIR": str(state_dir), "TOY_LLM__BASE_URL": llm_url, "TOY_LLM__MODEL": "scripted-model",
                "TOY_SESSION__IDLE_TIMEOUT_S": "30", **(env_extra or {})})
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(sys.executable, "-m", "toy_runtime", "run", env=env,
                                                    stdout=out, stderr=asyncio.subprocess.STDOUT)


@contextlib.asynccontextmanager
async def ear_on(rig):
    """What the mic hears, recorded beside the runtime (the rig's monitor) onto a FrameTape while the block runs."""
    import pytest

    from toy_runtime.adapters.sounddevice_io import SoundDeviceSource

    ear = SoundDeviceSource(rig.monitor, block_frames=1)
    tape = FrameTape()
    try:
        await ear.start()
    except Exception as exc:
        pytest.fail(f"cannot record from monitor={rig.monitor!r} while the runtime holds the mic ({exc}); "
                    "set monitor= to a shareable input (see tests/hil/README.md)")
    recorder = asyncio.create_task(tape.record(ear), name="hil:ear")
    try:
        yield tape
    finally:
        await ear.aclose()
        await asyncio.wait_for(recorder, 5)
