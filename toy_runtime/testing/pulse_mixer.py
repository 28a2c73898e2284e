"""A minimal headless PulseAudio (one null sink) for the mixer tests: ALSA's `pulse` CTL then offers a real
`Master` control whose changes `pactl` sees. Private socket under a tmp dir; nothing touches the user's session."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..errors import ToyError


class PulseError(ToyError, RuntimeError):
    """PulseAudio is missing or did not come up."""

    code = "pulse_failed"


class PulseMixerServer:
    """`pulseaudio -n` with a unix socket and a null sink named `sink`; sets PULSE_SERVER while running so that
    ALSA's pulse plugin (and pactl) in this process and its children talk to it."""

    def __init__(self, sink: str = "speaker", start_timeout_s: float = 10.0) -> None:
        if shutil.which("pulseaudio") is None or shutil.which("pactl") is None:
            raise PulseError("pulseaudio/pactl not found: apt-get install pulseaudio pulseaudio-utils")
        self.sink = sink
        self.start_timeout_s = start_timeout_s
        self.workdir = Path(tempfile.mkdtemp(prefix="pulse-mixer-"))
        self.socket = self.workdir / "native"
        self.server = f"unix:{self.socket}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._saved_env: dict[str, str | None] = {}

    def env(self) -> dict[str, str]:
        """Environment for child processes (pactl, amixer)."""
        env = dict(os.environ)
        env["PULSE_SERVER"] = self.server
        return env

    def start(self) -> "PulseMixerServer":
        script = self.workdir / "default.pa"
        script.write_text(
            f"load-module module-native-protocol-unix socket={self.socket} auth-anonymous=1\n"
            f"load-module module-null-sink sink_name={self.sink}\n"
            f"set-default-sink {self.sink}\n"
        )
        home = self.workdir / "home"
        runtime = self.workdir / "run"
        home.mkdir()
        runtime.mkdir(mode=0o700)
        env = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR=str(runtime), XDG_CONFIG_HOME=str(home / ".config"))
        env.pop("PULSE_SERVER", None)
        log = open(self.workdir / "pulseaudio.log", "wb")
        try:
            self._proc = subprocess.Popen(
                ["pulseaudio", "-n", f"--file={script}", "--daemonize=no", "--exit-idle-time=-1",
                 "--use-pid-file=false", "--disallow-module-loading=false", "--log-target=stderr"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise PulseError(f"pulseaudio exited with {self._proc.returncode}: {self.log_tail()}")
            if self.socket.exists() and self._pactl("info", check=False).returncode == 0:
                self._export()
                return self
            time.sleep(0.05)
        self.stop()
        raise PulseError(f"pulseaudio did not come up within {self.start_timeout_s}s: {self.log_tail()}")

    def _export(self) -> None:
        self._saved_env = {"PULSE_SERVER": os.environ.get("PULSE_SERVER")}
        os.environ["PULSE_SERVER"] = self.server

    def _pactl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["pactl", *args], env=self.env(), capture_output=True, text=True, check=check, timeout=10)

    def sink_volume_pct(self) -> int:
        """The sink volume according to `pactl get-sink-volume` (first channel, percent)."""
        out = self._pactl("get-sink-volume", self.sink).stdout
        match = re.search(r"(\d+)%", out)
        if not match:
            raise PulseError(f"cannot parse pactl output: {out!r}")
        return int(match.group(1))

    def sink_muted(self) -> bool:
        """The sink mute according to `pactl get-sink-mute`."""
        return "yes" in self._pactl("get-sink-mute", self.sink).stdout.lower()

    def set_sink_volume_pct(self, percent: int) -> None:
        """Change the volume from outside (as another program would)."""
        self._pactl("set-sink-volume", self.sink, f"{percent}%")

    def set_sink_muted(self, muted: bool) -> None:
        self._pactl("set-sink-mute", self.sink, "1" if muted else "0")

    def log_tail(self, lines: int = 15) -> str:
        path = self.workdir / "pulseaudio.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop pulseaudio, restore PULSE_SERVER and remove the tmp dir."""
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        finally:
            self._proc = None
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._saved_env = {}
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "PulseMixerServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_pulse_mixer_for_test() -> PulseMixerServer:
    """A started PulseMixerServer for a test fixture (the real ALSA mixer needs pyalsaaudio too); when it cannot run
    here the test is skipped, or fails with the original error under TOY_REQUIRE_SERVICES=1 (testing.services)."""
    from .services import service_unavailable

    try:
        import alsaaudio  # noqa: F401

        return PulseMixerServer().start()
    except (ImportError, PulseError, OSError) as exc:
        service_unavailable("PulseAudio / pyalsaaudio", exc)
        raise  # service_unavailable always raises
