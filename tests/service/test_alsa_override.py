"""configs/alsa/99-toy-runtime.conf, the ALSA override install-pi.sh puts on the toy: with it, PortAudio's device
listing no longer maps libavcodec (ALSA's a52 device) into the process. Checked in a child process with this
machine's real ALSA configuration, with and without the override."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toy_runtime.testing.alsa import toy_alsa_config

REPO = Path(__file__).resolve().parents[2]
OVERRIDE = REPO / "configs/alsa/99-toy-runtime.conf"
A52 = Path("/usr/share/alsa/alsa.conf.d/60-a52-encoder.conf")
LISTING = ("import json, sounddevice, sys; names = [d['name'] for d in sounddevice.query_devices()]; "
           "codec = sum('libavcodec' in line for line in open('/proc/self/maps')); "
           "sys.stdout.write(json.dumps([codec, names]))")


def listing(tmp_path: Path, *, override: bool) -> tuple[int, list[str]]:
    """(libavcodec mappings, device names) in a child that lists the audio devices through PortAudio."""
    config = toy_alsa_config(tmp_path, with_override=override, override=OVERRIDE)
    done = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, timeout=60,
                          env={"ALSA_CONFIG_PATH": str(config), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    codec, names = json.loads(done.stdout)
    return codec, names


@pytest.mark.skipif(not (A52.exists() and Path("/etc/alsa/conf.d/60-a52-encoder.conf").exists()),
                    reason="ALSA's a52 device is not enabled on this machine")
def test_the_override_keeps_the_a52_codec_libraries_out_and_lists_no_device_of_its_own(tmp_path):
    pytest.importorskip("sounddevice")
    codec, names = listing(tmp_path, override=False)
    assert codec > 0  # the plugin is there and PortAudio loads it while it lists the devices
    codec, names_with = listing(tmp_path, override=True)
    assert codec == 0
    assert "a52" not in names_with and names_with == [n for n in names if n != "a52"]  # no device appears
