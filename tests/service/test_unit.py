"""systemd/toy-runtime.service: systemd-analyze verify + security exposure, and the settings the runtime relies on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "toy-runtime.service"
INSTALLER = REPO / "scripts" / "install-pi.sh"
MAX_EXPOSURE = 3.0

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze not installed (apt-get install systemd)")


def unit_settings(path: Path = UNIT) -> dict[str, list[str]]:
    """Key → values (systemd allows a key several times, e.g. DeviceAllow=), ignoring comments."""
    settings: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key, []).append(value)
    return settings


def test_unit_has_what_the_runtime_relies_on():
    s = unit_settings()
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["main"]
    assert int(s["WatchdogSec"][0]) > 0
    assert s["Restart"] == ["on-failure"]
    assert "StartLimitIntervalSec" in s and "StartLimitBurst" in s
    assert int(s["TimeoutStartSec"][0]) >= 120
    assert s["User"] == ["toy"] and "DynamicUser" not in s
    assert s["ExecStart"] == ["/opt/toy-runtime/venv/bin/toy-runtime run --config /etc/toy-runtime/toy.toml"]
    assert s["EnvironmentFile"] == ["-/etc/toy-runtime/secrets.env"]
    assert s["StateDirectory"] == ["toy-runtime"] and s["ConfigurationDirectory"] == ["toy-runtime"]
    assert s["KillSignal"] == ["SIGTERM"] and "TimeoutStopSec" in s
    assert "char-alsa rw" in s["DeviceAllow"] and s["DevicePolicy"] == ["closed"]
    assert "mosquitto.service" in s["Wants"][0] and "mosquitto.service" in s["After"][0]
    # Decided against, with the reason in the unit: W^X breaks sounddevice's cffi callbacks; a private user
    # namespace drops the audio group.
    assert s["MemoryDenyWriteExecute"] == ["no"] and s["PrivateUsers"] == ["no"]


def test_unit_preloads_the_allocator_the_bench_measures_and_the_installer_installs():
    from toy_runtime.service.heap import JEMALLOC_ENV

    settings = dict(item.split("=", 1) for line in unit_settings()["Environment"] for item in line.split())
    assert {key: settings.get(key) for key in JEMALLOC_ENV} == JEMALLOC_ENV
    assert re.search(r"^\s+libjemalloc2\b", INSTALLER.read_text(), re.M)


@pytest.mark.models  # a child loads the voice (the plugin cannot read a script in a string)
def test_the_runtime_runs_on_the_units_allocator(tmp_path):
    """A child with the unit's LD_PRELOAD and MALLOC_CONF: jemalloc is mapped, takes every option without a
    complaint, and the runtime's engines load and synthesize on it."""
    from toy_runtime.service.heap import JEMALLOC_ENV, jemalloc_installed
    from toy_runtime.testing.services import unavailable

    if not jemalloc_installed():
        unavailable("libjemalloc2 is not installed (apt-get install libjemalloc2)")
    script = ("import json, sys\n"
              "from toy_runtime.adapters.piper_tts import PiperSynthesizer\n"
              "pcm = b''.join(p.pcm for p in PiperSynthesizer(deterministic=True).synthesize_blocking('Hello!'))\n"
              "maps = open('/proc/self/maps').read()\n"
              "sys.stdout.write(json.dumps([len(pcm), 'libjemalloc' in maps]))\n")
    env = {**os.environ, **JEMALLOC_ENV, "MALLOC_CONF": JEMALLOC_ENV["MALLOC_CONF"] + ",abort_conf:true"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # abort_conf: an option jemalloc does not take aborts the child
    assert "jemalloc" not in done.stderr and "preloaded" not in done.stderr, done.stderr
    samples, mapped = json.loads(done.stdout)
    assert mapped and samples > 22050 // 4  # a spoken "Hello!", not an empty buffer


def test_installer_creates_every_supplementary_group():
    groups = unit_settings()["SupplementaryGroups"][0].split()
    match = re.search(r"^DEVICE_GROUPS=\(([^)]*)\)", INSTALLER.read_text(), re.M)
    assert match and match.group(1).split() == groups


def verifiable_copy(tmp_path: Path) -> Path:
    """The unit with only ExecStart's binary swapped for one that exists here.

    `systemd-analyze verify` fails when ExecStart's binary is missing, and /opt/toy-runtime/venv exists only on an
    installed toy. The interpreter running this test runs the same CLI (`python -m toy_runtime`); every other line
    is byte-identical.
    """
    text = UNIT.read_text()
    old = "ExecStart=/opt/toy-runtime/venv/bin/toy-runtime "
    assert text.count(old) == 1
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace(old, f"ExecStart={sys.executable} -m toy_runtime "))
    return copy


@needs_analyze
def test_systemd_analyze_verify_passes(tmp_path):
    copy = verifiable_copy(tmp_path)
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)],
                            capture_output=True, text=True, timeout=60)
    # verify exits 0 even for unknown keys; its warnings name the file. Lines about other units are not ours.
    ours = [line for line in (result.stdout + result.stderr).splitlines()
            if copy.name in line or str(tmp_path) in line]
    assert result.returncode == 0, result.stderr
    assert ours == []


@needs_analyze
def test_verify_would_catch_a_typo(tmp_path):
    # Guards the test above: the warning filter does see problems in our file.
    copy = verifiable_copy(tmp_path)
    copy.write_text(copy.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict"))
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)],
                            capture_output=True, text=True, timeout=60)
    assert "ProtectSytem" in result.stderr


def exposure(unit: Path) -> float:
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
                            capture_output=True, text=True, timeout=60)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, result.stdout[-500:] + result.stderr
    return float(match.group(1))


@needs_analyze
def test_security_exposure_is_at_most_3(tmp_path):
    score = exposure(UNIT)
    print(f"systemd-analyze security exposure: {score}")
    assert score <= MAX_EXPOSURE


@needs_analyze
def test_exposure_parser_sees_an_unhardened_unit(tmp_path):
    bare = tmp_path / "bare.service"
    bare.write_text("[Service]\nExecStart=/bin/true\n")
    assert exposure(bare) > 9.0


MDWE_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN (Linux >= 6.3)
        print("no-mdwe"); sys.exit(0)
    import cffi
    try:
        cffi.FFI().callback("int(int)", lambda x: x)
    except MemoryError:
        print("callback-refused"); sys.exit(0)
    print("callback-ok")
    """
)


def test_memory_deny_write_execute_would_break_sounddevice_callbacks():
    """Why the unit keeps MemoryDenyWriteExecute=no: sounddevice's callbacks are cffi closures needing W+X memory.

    If this starts failing with "callback-ok", cffi no longer needs W+X: MemoryDenyWriteExecute=yes can be tried.
    """
    pytest.importorskip("cffi")
    out = subprocess.run([sys.executable, "-c", MDWE_PROBE], capture_output=True, text=True, timeout=60).stdout.strip()
    if out == "no-mdwe":
        pytest.skip("kernel has no PR_SET_MDWE (Linux < 6.3): cannot emulate MemoryDenyWriteExecute here")
    assert out == "callback-refused"
