"""A virtual sound card for tests and benchmarks: a private headless PulseAudio with a "mic" and a "speaker".

    with VirtualSoundCard() as card:
        card.apply_env()                 # PULSE_SERVER/PULSE_SOURCE/PULSE_SINK for this process (before PortAudio opens)
        card.play_to_mic(pcm, 22050)     # what the runtime "hears" on mic.monitor
        rec = card.start_recording()     # what the runtime plays to "speaker"
        ...
        pcm16k = rec.stop()

The runtime captures from `mic.monitor` and plays to `speaker` through PortAudio's ALSA "pulse" device
(libasound2-plugins), selecting them with PULSE_SOURCE / PULSE_SINK. Null sinks render in 2 s blocks unless a
client asks for low latency, so each monitor is looped into a spare sink at 10 ms latency and each sink is
suspended and resumed once to apply it. Everything lives in a private temp dir and is stopped on exit.

`start_probe(card)` adds a stereo "probe" sink that hears the mic feed on the left and the speaker on the right (two
10 ms loopbacks) and records it: both on one sample clock, for outside-in latency measurement (`bench voice`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from .services import end_process

__all__ = ["ProbeRecording", "Recording", "VirtualSoundCard", "pulseaudio_available", "start_probe"]

MIC_SINK = "mic"
SPEAKER_SINK = "speaker"


def _die_with_parent() -> None:
    # Linux: SIGTERM the daemon if the test process dies without running __exit__ (killed, os._exit).
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def pulseaudio_available() -> bool:
    """True when the pulseaudio daemon and its command-line clients are installed."""
    return all(shutil.which(tool) for tool in ("pulseaudio", "pactl", "pacat", "parec"))


class Recording:
    """A running `parec` of a monitor source; `stop()` returns the captured int16 mono PCM."""

    def __init__(self, proc: subprocess.Popen, rate: int) -> None:
        self.sample_rate_hz = rate
        self._proc = proc
        self._buf = bytearray()
        # A reader thread: the pipe holds only ~2 s of 16 kHz audio, parec would stall without it.
        self._thread = threading.Thread(target=self._read, name="parec-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        out: IO[bytes] = self._proc.stdout  # type: ignore[assignment]
        while True:
            data = out.read(4096)
            if not data:
                return
            self._buf += data

    @property
    def captured(self) -> bytes:
        """What has been captured so far (a copy)."""
        return bytes(self._buf)

    def stop(self) -> bytes:
        """End the recording and return all captured PCM."""
        if self._proc.poll() is None:
            self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._thread.join(timeout=5)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        return bytes(self._buf[: len(self._buf) // 2 * 2])


class VirtualSoundCard:
    """Headless PulseAudio with null sinks `mic` (16 kHz mono) and `speaker` (`speaker_rate_hz`, stereo)."""

    def __init__(self, *, speaker_rate_hz: int = 48000, speaker_channels: int = 2, start_timeout_s: float = 10.0):
        self.speaker_rate_hz = speaker_rate_hz
        self.speaker_channels = speaker_channels
        self._timeout = start_timeout_s
        self._dir: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._recordings: list[Recording] = []
        self._noise: list[subprocess.Popen] = []

    # -- life cycle ------------------------------------------------------------------------------------------

    def __enter__(self) -> "VirtualSoundCard":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the daemon, load the sinks and loopbacks, and wait until clients can connect.

        Call it from a thread that outlives the card (normally the main thread): the daemon is bound to the
        starting thread with PR_SET_PDEATHSIG so that a killed test run does not leave it behind.
        """
        if not pulseaudio_available():
            raise RuntimeError("pulseaudio is not installed (apt install pulseaudio pulseaudio-utils)")
        self._dir = Path(tempfile.mkdtemp(prefix="toy-pulse-"))
        for sub in ("home", "runtime", "state"):
            (self._dir / sub).mkdir(mode=0o700)
        script = self._dir / "card.pa"
        script.write_text(
            "\n".join(
                [
                    f"load-module module-native-protocol-unix socket={self.socket_path} auth-anonymous=1",
                    f"load-module module-null-sink sink_name={MIC_SINK} rate=16000 channels=1"
                    " sink_properties=device.description=virtual-mic",
                    f"load-module module-null-sink sink_name={SPEAKER_SINK} rate={self.speaker_rate_hz}"
                    f" channels={self.speaker_channels} sink_properties=device.description=virtual-speaker",
                    "load-module module-null-sink sink_name=spare sink_properties=device.description=spare",
                    f"set-default-sink {SPEAKER_SINK}",
                    f"set-default-source {MIC_SINK}.monitor",
                    "",
                ]
            )
        )
        env = self._daemon_env()
        log = open(self._dir / "pulseaudio.log", "wb")
        try:
            self._proc = subprocess.Popen(
                ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit",
                 "--use-pid-file=false", "--log-target=stderr", "-F", str(script)],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        try:
            self._wait_ready()
            # Loopbacks are loaded after start-up: loaded from the script, they made the daemon reconfigure
            # the mic sink to 48 kHz (measured). Then re-open the sinks so they run at the loopbacks' low
            # latency instead of 2 s blocks.
            for sink in (MIC_SINK, SPEAKER_SINK):
                self.pactl("load-module", "module-loopback", f"source={sink}.monitor", "sink=spare", "latency_msec=10")
            for sink in (MIC_SINK, SPEAKER_SINK):
                self.pactl("suspend-sink", sink, "1")
                self.pactl("suspend-sink", sink, "0")
        except BaseException:
            self.stop()
            raise

    def _daemon_env(self) -> dict[str, str]:
        assert self._dir is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")}
        env.update(
            HOME=str(self._dir / "home"),
            XDG_RUNTIME_DIR=str(self._dir / "runtime"),
            XDG_STATE_HOME=str(self._dir / "state"),
            XDG_CONFIG_HOME=str(self._dir / "home"),
        )
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        return env

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"pulseaudio exited early:\n{self.log_text()}")
            if self.socket_path.exists():
                probe = subprocess.run(["pactl", "info"], env=self.env, capture_output=True, timeout=5)
                if probe.returncode == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"pulseaudio did not start within {self._timeout} s:\n{self.log_text()}")

    def stop(self) -> None:
        """Stop recordings and the daemon, remove the temp dir. Idempotent."""
        for rec in self._recordings:
            rec.stop()
        self._recordings.clear()
        for noise in self._noise:
            end_process(noise, timeout_s=2)
        self._noise.clear()
        proc, self._proc = self._proc, None
        if proc is not None:
            end_process(proc, timeout_s=5)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- connection details ----------------------------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        """The daemon's native-protocol socket."""
        if self._dir is None:
            raise RuntimeError("card is not started")
        return self._dir / "native"

    @property
    def server(self) -> str:
        """The PULSE_SERVER value for clients."""
        return f"unix:{self.socket_path}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for client subprocesses (pactl, pacat, a runtime under test)."""
        env = dict(os.environ)
        env.update(self.runtime_env)
        return env

    @property
    def runtime_env(self) -> dict[str, str]:
        """The variables a runtime needs: server, and mic.monitor / speaker as PortAudio's "pulse" device ends."""
        return {"PULSE_SERVER": self.server, "PULSE_SOURCE": f"{MIC_SINK}.monitor", "PULSE_SINK": SPEAKER_SINK}

    def apply_env(self, environ: "os._Environ[str] | dict[str, str] | None" = None) -> None:
        """Set runtime_env in this process (do it before PortAudio opens a stream)."""
        target = os.environ if environ is None else environ
        target.update(self.runtime_env)

    @contextlib.contextmanager
    def applied_env(self):
        """runtime_env set in this process for the duration, the previous values restored afterwards."""
        saved = {key: os.environ.get(key) for key in self.runtime_env}
        self.apply_env()
        try:
            yield self
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def log_text(self) -> str:
        """The daemon's log (for failure messages)."""
        if self._dir is None:
            return ""
        try:
            return (self._dir / "pulseaudio.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def pactl(self, *args: str) -> str:
        """Run pactl against this card; returns stdout, raises on failure."""
        out = subprocess.run(["pactl", *args], env=self.env, capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(f"pactl {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    # -- audio in and out --------------------------------------------------------------------------------

    def play_to_mic(self, pcm: bytes, sample_rate_hz: int, *, pad_ms: int = 50, wait: bool = True,
                    buffer_ms: int = 500) -> subprocess.Popen:
        """Play int16 mono PCM into the "mic" sink (heard on mic.monitor), padded with silence both ends.

        With `wait=True` returns after pacat has drained (the audio has been rendered). `buffer_ms` is how much
        audio PulseAudio holds for pacat ahead of playback.
        """
        pad = b"\0" * (sample_rate_hz * pad_ms // 1000 * 2)
        proc = subprocess.Popen(
            ["pacat", "--playback", f"--device={MIC_SINK}", "--raw", "--format=s16le", "--channels=1",
             # A deep buffer: with 20 ms, pacat starved under CPU load and the sink played silence into the middle
             # of the words (a 1.63 s phrase captured 20-60 ms longer, correlation 0.6 with the original, and
             # misrecognised); with 300 ms every capture matched the original, also with two busy cores (measured).
             f"--rate={sample_rate_hz}", f"--latency-msec={buffer_ms}"],
            env=self.env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if wait else subprocess.DEVNULL,
        )

        def feed() -> None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(pad + pcm + pad)
            finally:
                proc.stdin.close()

        if wait:
            feed()
            proc.wait(timeout=30 + len(pcm) / 2 / sample_rate_hz)
            err = proc.stderr.read() if proc.stderr is not None else b""
            if proc.stderr is not None:
                proc.stderr.close()
            if proc.returncode != 0:
                raise RuntimeError(f"pacat failed: {err.decode(errors='replace')}")
        else:
            threading.Thread(target=feed, name="pacat-feeder", daemon=True).start()
        return proc

    def add_echo_path(self, *, delay_ms: int = 60, gain_db: float = -6.0) -> int:
        """The echo rig: what the speaker plays comes back into the mic `delay_ms` later (PulseAudio's loopback,
        which holds that latency by adjusting its rate: a real, slightly wandering delay) and `gain_db` quieter, as
        from a speaker a few centimetres from the toy's one microphone. Returns the module index (for
        `remove_module`)."""
        before = self._loopback_inputs()
        index = int(self.pactl("load-module", "module-loopback", f"source={SPEAKER_SINK}.monitor",
                               f"sink={MIC_SINK}", f"latency_msec={delay_ms}", "channels=1",
                               "source_dont_move=true", "sink_dont_move=true", "adjust_time=0").strip())
        for sink_input in self._loopback_inputs() - before:
            self.pactl("set-sink-input-volume", sink_input, f"{gain_db:.1f}dB")
        return index

    def add_room_noise(self, pcm: bytes, sample_rate_hz: int) -> subprocess.Popen:
        """Loop `pcm` (int16 mono, at the level it should have) into the mic for as long as the card runs: the
        room's fan, TV or other voices. Stopped with the card, or with `.terminate()` on the returned process."""
        loop_s = max(1, len(pcm) // (2 * sample_rate_hz))
        repeats = max(1, 3600 // loop_s)  # an hour of it: longer than any test or bench
        proc = subprocess.Popen(
            ["pacat", "--playback", f"--device={MIC_SINK}", "--raw", "--format=s16le", "--channels=1",
             f"--rate={sample_rate_hz}", "--latency-msec=300"],
            env=self.env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def feed() -> None:
            assert proc.stdin is not None
            try:
                for _ in range(repeats):
                    proc.stdin.write(pcm)
            except (BrokenPipeError, ValueError, OSError):
                pass  # stopped

        threading.Thread(target=feed, name="room-noise", daemon=True).start()
        self._noise.append(proc)
        return proc

    def remove_module(self, index: int) -> None:
        """Unload a module this card loaded (an echo path)."""
        self.pactl("unload-module", str(index))

    def _loopback_inputs(self) -> set[str]:
        out = self.pactl("list", "short", "sink-inputs")
        return {line.split("\t")[0] for line in out.splitlines() if "module-loopback" in line}

    def start_recording(self, *, source: str = f"{SPEAKER_SINK}.monitor", sample_rate_hz: int = 16000
                        ) -> Recording:
        """Start recording a monitor (default: what is played to "speaker") as int16 mono PCM."""
        proc = subprocess.Popen(
            ["parec", f"--device={source}", "--raw", "--format=s16le", "--channels=1",
             f"--rate={sample_rate_hz}", "--latency-msec=20"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )
        rec = Recording(proc, sample_rate_hz)
        self._recordings.append(rec)
        return rec

    def record_speaker(self, seconds: float, *, sample_rate_hz: int = 16000) -> bytes:
        """Record the speaker's monitor for `seconds` (blocking) and return the PCM."""
        rec = self.start_recording(sample_rate_hz=sample_rate_hz)
        time.sleep(seconds)
        pcm = rec.stop()
        self._recordings.remove(rec)
        return pcm


# -- the acoustic probe: mic feed and speaker on one clock ----------------------------------------------------

PROBE_SINK = "probe"


class ProbeRecording(Recording):
    """A 2-channel `parec` of the probe (left = what the mic hears, right = what the speaker plays).

    `arrivals` holds (time.monotonic() when a chunk was read, frames received so far) so the recording's sample
    clock can be placed on CLOCK_MONOTONIC (see `first_frame_monotonic`).
    """

    def __init__(self, proc: subprocess.Popen, rate: int) -> None:
        self.arrivals: list[tuple[float, int]] = []
        super().__init__(proc, rate)

    def _read(self) -> None:
        fd = self._proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            try:
                data = os.read(fd, 4096)  # small reads: each arrival time is close to when the data came
            except OSError:
                return
            if not data:
                return
            self._buf += data
            self.arrivals.append((time.monotonic(), len(self._buf) // 4))

    def first_frame_monotonic(self) -> float | None:
        """An estimate of the CLOCK_MONOTONIC time of frame 0: the earliest `arrival − frames/rate` (the chunk
        that waited least in the pipe). Late by the probe's own source latency (a few ms), never early."""
        if not self.arrivals:
            return None
        return min(at - frames / self.sample_rate_hz for at, frames in self.arrivals)


def _probe_commands(rate: int) -> list[tuple[str, ...]]:
    return [
        ("load-module", "module-null-sink", f"sink_name={PROBE_SINK}", f"rate={rate}", "channels=2",
         "channel_map=front-left,front-right", "sink_properties=device.description=probe"),
        # the mic feed as the left channel only, the speaker as the right channel only (its left is dropped)
        # (the mono mic needs remixing to become front-left; a front-left stream then reaches the left channel only)
        ("load-module", "module-loopback", f"source={MIC_SINK}.monitor", f"sink={PROBE_SINK}", "latency_msec=10",
         "channels=1", "channel_map=front-left"),
        ("load-module", "module-loopback", f"source={SPEAKER_SINK}.monitor", f"sink={PROBE_SINK}",
         "latency_msec=10", "channels=1", "channel_map=front-right", "remix=no"),
    ]


def start_probe(card: VirtualSoundCard, *, sample_rate_hz: int = 16000) -> ProbeRecording:
    """Add the probe sink to a started card and record it: both loopbacks have the same 10 ms latency, so the mic
    feed and the speaker keep their relative timing in the one 2-channel stream."""
    for command in _probe_commands(sample_rate_hz):
        card.pactl(*command)
    card.pactl("suspend-sink", PROBE_SINK, "1")
    card.pactl("suspend-sink", PROBE_SINK, "0")
    proc = subprocess.Popen(
        ["parec", f"--device={PROBE_SINK}.monitor", "--raw", "--format=s16le", "--channels=2",
         f"--rate={sample_rate_hz}", "--latency-msec=10"],
        env=card.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    rec = ProbeRecording(proc, sample_rate_hz)
    card._recordings.append(rec)
    return rec
