"""configs/alsa/99-toy-runtime.conf, the ALSA override install-pi.sh puts on the toy: with it, PortAudio's device
listing no longer maps libavcodec (ALSA's a52 device) into the process. Checked in a child process with this
machine's real ALSA configuration, the override added last."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
A52 = Path("/usr/share/alsa/alsa.conf.d/60-a52-encoder.conf")
LISTING = ("import sounddevice, sys; sounddevice.query_devices(); "
           "sys.stdout.write(str(sum('libavcodec' in line for line in open('/proc/self/maps'))))")


def mapped_codec_lines(tmp_path: Path, *, override: bool) -> int:
    """libavcodec mappings in a child that imports sounddevice (PortAudio lists the ALSA devices then)."""
    system = Path("/usr/share/alsa/alsa.conf").read_text()
    extra = tmp_path / "conf.d"
    extra.mkdir(exist_ok=True)
    if override:
        (extra / "99-toy-runtime.conf").write_bytes((REPO / "configs/alsa/99-toy-runtime.conf").read_bytes())
    # the system's alsa.conf loads /etc/alsa/conf.d; a second directory after it holds the override
    config = tmp_path / ("with.conf" if override else "without.conf")
    config.write_text(system.replace('"/etc/alsa/conf.d"', f'"/etc/alsa/conf.d"\n\t\t\t"{extra}"', 1))
    done = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, timeout=60,
                          env={"ALSA_CONFIG_PATH": str(config), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(not (A52.exists() and Path("/etc/alsa/conf.d/60-a52-encoder.conf").exists()),
                    reason="ALSA's a52 device is not enabled on this machine")
def test_the_override_keeps_the_a52_codec_libraries_out_of_the_process(tmp_path):
    pytest.importorskip("sounddevice")
    assert mapped_codec_lines(tmp_path, override=False) > 0  # the plugin is there and PortAudio loads it
    assert mapped_codec_lines(tmp_path, override=True) == 0
