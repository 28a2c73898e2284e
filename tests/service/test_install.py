"""scripts/install-pi.sh: dry-run changes nothing; a real --skip-system run into a tmp root is complete and idempotent;
model checksums are enforced; the installed broker config works with the password it put into secrets.env."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from toy_runtime.testing.broker import free_port

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install-pi.sh"


def run_installer(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=240)
    if check and result.returncode != 0:
        raise AssertionError(f"install-pi.sh {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stub_wheel(directory: Path) -> Path:
    """A minimal real wheel named toy-runtime with a `toy-runtime` console script.

    The real package cannot be built offline here (setuptools without `wheel`); the installer's pip step is the same
    for any wheel.
    """
    files = {
        "toy_runtime_stub/__init__.py": b"def main():\n    print('toy-runtime stub')\n    return 0\n",
        "toy_runtime-0.0.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: toy-runtime\nVersion: 0.0.0\n",
        "toy_runtime-0.0.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                             b"Tag: py3-none-any\n",
        "toy_runtime-0.0.0.dist-info/entry_points.txt": b"[console_scripts]\ntoy-runtime = toy_runtime_stub:main\n",
    }
    record = []
    path = directory / "toy_runtime-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append("toy_runtime-0.0.0.dist-info/RECORD,,")
        whl.writestr("toy_runtime-0.0.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def model_fixtures(directory: Path) -> tuple[bytes, bytes, Path, Path]:
    """A voice file and a zipped model dir served from file:// URLs, like the real manifest's entries."""
    voice = b"not really an onnx voice\n" * 100
    (directory / "voice.onnx").write_bytes(voice)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("demo-model-1/conf/model.conf", "--sample-frequency=16000\n")
        z.writestr("demo-model-1/am/final.mdl", "weights")
    archive = buf.getvalue()
    (directory / "demo-model-1.zip").write_bytes(archive)
    return voice, archive, directory / "voice.onnx", directory / "demo-model-1.zip"


def write_manifest(path: Path, *entries: tuple[str, str, Path]) -> Path:
    path.write_text("# test manifest\n\n" + "".join(f"{d}  {s}  {src.as_uri()}\n" for d, s, src in entries))
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """One real install into a tmp root (no apt/users/systemctl), shared by the checks below."""
    base = tmp_path_factory.mktemp("install")
    root = base / "root"
    voice, archive, voice_src, archive_src = model_fixtures(base)
    manifest = write_manifest(base / "models.manifest",
                              ("piper/voice.onnx", sha256(voice), voice_src),
                              ("demo-model-1.zip", sha256(archive), archive_src))
    wheel = stub_wheel(base)
    args = ("--skip-system", "--prefix", str(root), "--wheel", str(wheel), "--extras", "",
            "--pip-arg=--no-index", "--python", sys.executable, "--manifest", str(manifest))
    first = run_installer(*args)
    return {"root": root, "args": args, "first": first, "voice": voice, "archive": archive}


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_script_syntax_and_shellcheck():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_dry_run_prints_every_action_and_changes_nothing(tmp_path):
    root = tmp_path / "root"
    result = run_installer("--dry-run", "--prefix", str(root), "--allow-unverified")
    out = result.stdout
    for action in ("python3 -m venv", "pip install", "curl", "install -m 0644", "toy.toml",
                   "secrets.env", "toy-runtime.service", "mosquitto-local.conf", "systemctl enable toy-runtime"):
        assert action in out, action
    assert "[run]" not in out
    assert "time zone " in out and "[session] timezone" in out  # the zone reminders will use, and how to change it
    assert "would be taken; nothing was changed" in out
    assert not root.exists()


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_dry_run_reports_an_unverified_checksum_as_a_failure(tmp_path):
    result = run_installer("--dry-run", "--prefix", str(tmp_path / "root"), "--skip-system", check=False)
    assert result.returncode == 1
    assert "WOULD FAIL: vosk-model-small-en-us-0.15.zip" in result.stdout
    assert not (tmp_path / "root").exists()


@pytest.mark.slow  # a real install: a venv and pip
def test_real_install_into_a_tmp_root(installed):
    root = installed["root"]
    out = installed["first"].stdout
    assert "[run]" in out and "[skip-system] useradd" in out
    # The package: a working console script in the venv.
    exe = root / "opt/toy-runtime/venv/bin/toy-runtime"
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip() == "toy-runtime stub"
    # Models: verified, the zip unpacked (and stamped), the archive itself gone.
    models = root / "var/lib/toy-runtime/models"
    assert (models / "piper/voice.onnx").read_bytes() == installed["voice"]
    assert (models / "demo-model-1/conf/model.conf").is_file()
    assert (models / "demo-model-1/.source-sha256").read_text().strip() == sha256(installed["archive"])
    assert not (models / "demo-model-1.zip").exists()
    assert oct((root / "var/lib/toy-runtime").stat().st_mode & 0o777) == "0o700"
    # Config + secrets.
    etc = root / "etc/toy-runtime"
    assert (etc / "toy.toml").read_text() == (REPO / "configs/toy.toml").read_text()
    secrets = etc / "secrets.env"
    assert oct(secrets.stat().st_mode & 0o777) == "0o600"
    assert "TOY_MQTT__PASSWORD=" in secrets.read_text()
    # Unit and broker files, byte-identical to the repo's.
    assert (root / "etc/systemd/system/toy-runtime.service").read_bytes() == (
        REPO / "systemd/toy-runtime.service").read_bytes()
    assert (root / "etc/mosquitto/conf.d/toy-runtime.conf").read_bytes() == (
        REPO / "systemd/mosquitto-local.conf").read_bytes()
    assert (root / "etc/alsa/conf.d/99-toy-runtime.conf").read_bytes() == (
        REPO / "configs/alsa/99-toy-runtime.conf").read_bytes()
    passwd = (root / "etc/mosquitto/toy-runtime.passwd").read_text()
    assert passwd.startswith("toy1:$") and "TOY_MQTT__PASSWORD" not in passwd  # hashed, not the plain password
    assert oct((root / "etc/mosquitto/toy-runtime.passwd").stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow  # a real install: a venv and pip
def test_second_run_has_nothing_to_do_and_keeps_local_edits(installed):
    root = installed["root"]
    toml = root / "etc/toy-runtime/toy.toml"
    secrets = root / "etc/toy-runtime/secrets.env"
    toml.write_text(toml.read_text() + "\n# edited on the toy\n")
    secrets_before = secrets.read_text()
    second = run_installer(*installed["args"])
    assert "[run]" not in second.stdout, second.stdout
    assert "nothing to do" in second.stdout
    assert toml.read_text().endswith("# edited on the toy\n")
    assert secrets.read_text() == secrets_before  # the broker password is not rotated


@pytest.mark.slow  # a real install: a venv and pip
@pytest.mark.broker
def test_installed_broker_config_accepts_the_generated_password(installed, tmp_path):
    if shutil.which("mosquitto") is None or shutil.which("mosquitto_pub") is None:
        pytest.skip("mosquitto / mosquitto-clients not installed")
    root = installed["root"]
    port = free_port()
    conf = (root / "etc/mosquitto/conf.d/toy-runtime.conf").read_text()
    # Same file, on a free port and with the tmp root's paths.
    conf = conf.replace("listener 1883 127.0.0.1", f"listener {port} 127.0.0.1")
    conf = conf.replace("/etc/mosquitto/", f"{root}/etc/mosquitto/")
    # mosquitto started as root drops to the `mosquitto` user before it reads the password file (which is why the
    # installer chowns it to mosquitto); --skip-system left it root-owned inside a root-only pytest dir, so stay root.
    if os.geteuid() == 0:
        conf += "\nuser root\n"
    (tmp_path / "mosquitto.conf").write_text(conf)
    password = next(line.split("=", 1)[1] for line in (root / "etc/toy-runtime/secrets.env").read_text().splitlines()
                    if line.startswith("TOY_MQTT__PASSWORD="))
    broker = subprocess.Popen(["mosquitto", "-c", str(tmp_path / "mosquitto.conf")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert broker.poll() is None, broker.stdout.read()
                assert time.monotonic() < deadline, "broker did not start"
                time.sleep(0.05)

        def publish(*auth: str) -> int:
            return subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), *auth, "-t", "toy/toy1/state",
                                   "-m", "idle"], capture_output=True, timeout=20).returncode

        assert publish("-u", "toy1", "-P", password) == 0
        assert publish() != 0  # anonymous
        assert publish("-u", "toy1", "-P", password + "x") != 0
    finally:
        broker.terminate()
        broker.wait(timeout=10)


@pytest.mark.slow  # a real install: a venv and pip
def test_checksums_are_enforced(tmp_path):
    base = tmp_path
    root = base / "root"
    voice, _, voice_src, _ = model_fixtures(base)
    common = ("--skip-system", "--prefix", str(root), "--no-package", "--no-local-broker", "--python", sys.executable)
    target = root / "var/lib/toy-runtime/models/piper/voice.onnx"

    wrong = write_manifest(base / "wrong.manifest", ("piper/voice.onnx", sha256(b"other"), voice_src))
    result = run_installer(*common, "--manifest", str(wrong), check=False)
    assert result.returncode != 0 and "sha256 mismatch" in result.stderr
    assert not target.exists()

    unverified = write_manifest(base / "unverified.manifest", ("piper/voice.onnx", "UNVERIFIED", voice_src))
    result = run_installer(*common, "--manifest", str(unverified), check=False)
    assert result.returncode != 0 and "--allow-unverified" in result.stderr
    assert not target.exists()

    result = run_installer(*common, "--manifest", str(unverified), "--allow-unverified")
    assert target.read_bytes() == voice
    assert sha256(voice) in result.stdout  # the hash to pin in the manifest


def test_shipped_manifest_is_well_formed():
    lines = [line.split() for line in (REPO / "scripts/models.manifest").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert lines
    for dest, digest, url in lines:
        assert url.startswith(("https://huggingface.co/rhasspy/piper-voices/", "https://alphacephei.com/vosk/"))
        assert digest == "UNVERIFIED" or (len(digest) == 64 and int(digest, 16) >= 0)


def test_prefix_without_skip_system_is_refused(tmp_path):
    result = run_installer("--prefix", str(tmp_path / "root"), check=False)
    assert result.returncode != 0 and "--skip-system" in result.stderr


@pytest.mark.slow  # a real install: a venv and pip
def test_a_provisioned_broker_password_goes_into_secrets_and_nowhere_else(tmp_path):
    """A fleet toy gets its own broker password from provisioning: --mqtt-password-file writes it to secrets.env
    (0600), replaces an older one on a second run, and never prints it."""
    root = tmp_path / "root"
    empty = write_manifest(tmp_path / "empty.manifest")
    common = ("--skip-system", "--prefix", str(root), "--no-package", "--no-local-broker", "--no-models",
              "--python", sys.executable, "--manifest", str(empty))
    secret = tmp_path / "toy-0001.password"
    secret.write_text("first-Pa55\n")
    first = run_installer(*common, "--mqtt-password-file", str(secret))
    secrets = root / "etc/toy-runtime/secrets.env"
    assert "TOY_MQTT__PASSWORD=first-Pa55\n" in secrets.read_text()
    assert oct(secrets.stat().st_mode & 0o777) == "0o600"
    secret.write_text("second-Pa55\n")
    second = run_installer(*common, "--mqtt-password-file", str(secret))
    lines = secrets.read_text().splitlines()
    assert [line for line in lines if line.startswith("TOY_MQTT__PASSWORD=")] == ["TOY_MQTT__PASSWORD=second-Pa55"]
    assert "OPENAI_BASE_URL" in secrets.read_text()  # the rest of the file is kept
    for result in (first, second):
        assert "Pa55" not in result.stdout + result.stderr
    missing = run_installer(*common, "--mqtt-password-file", str(tmp_path / "nope"), check=False)
    assert missing.returncode != 0 and "--mqtt-password-file: cannot read" in missing.stderr
