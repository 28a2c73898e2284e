"""A private mosquitto broker for tests and benchmarks: free port on 127.0.0.1, generated config, torn down on exit."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import ToyError


def mosquitto_binary() -> str | None:
    """mosquitto's path (/usr/sbin is not on every PATH), None when it is not installed."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    return binary if Path(binary).exists() else None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class TestCerts:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost."""

    __test__ = False  # not a pytest class, despite the name

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_test_certs(directory: Path | str, host: str = "127.0.0.1") -> TestCerts:
    """Create a CA and a server certificate signed by it with the openssl CLI (valid one day)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = d / "ca.key", d / "ca.pem", d / "server.key", d / "server.csr", d / "server.pem"
    ext = d / "san.ext"
    ext.write_text(f"subjectAltName=IP:{host},DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
        "-subj", "/CN=toy-runtime test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={host}")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(cert),
        "-days", "1", "-extfile", str(ext))
    return TestCerts(ca_file=ca, cert_file=cert, key_file=key)


class BrokerError(ToyError, RuntimeError):
    """mosquitto is missing or did not come up."""

    code = "broker_failed"


class MosquittoBroker:
    """A mosquitto process with its own config, password file and ACL in a tmp dir.

    `users` maps user name → password (hashed with mosquitto_passwd); when given, anonymous clients are refused.
    `acl` is the text of an ACL file (mosquitto's `user`/`topic`/`pattern` syntax). Without `persistence` a `restart()`
    loses retained messages and sessions (a crashed broker); with it, `stop()` saves them and `start()` restores them.
    """

    def __init__(
        self,
        *,
        users: Mapping[str, str] | None = None,
        acl: str | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        workdir: Path | str | None = None,
        persistence: bool = False,
        tls: "TestCerts | None" = None,
        extra_config: str = "",
        start_timeout_s: float = 5.0,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.users = dict(users or {})
        self.acl = acl
        self.persistence = persistence
        self.tls = tls
        self.extra_config = extra_config
        self.start_timeout_s = start_timeout_s
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="mosquitto-"))
        self.config_path = self.workdir / "mosquitto.conf"
        self.log_path = self.workdir / "mosquitto.log"
        self._proc: subprocess.Popen[bytes] | None = None
        binary = mosquitto_binary()
        if binary is None:
            raise BrokerError("mosquitto not found: apt-get install mosquitto")
        self._binary = binary

    @property
    def url(self) -> str:
        """`mqtt://host:port` (or `mqtts://` with TLS) of the listener."""
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _write_config(self) -> None:
        lines = [
            "per_listener_settings false",
            f"listener {self.port} {self.host}",
            "set_tcp_nodelay true",  # without it small request/reply round trips cost ~40-90 ms (Nagle + delayed ACK)
            f"persistence {'true' if self.persistence else 'false'}",
            f"persistence_location {self.workdir}/",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            "log_timestamp_format %H:%M:%S",
        ]
        if self.tls:
            lines += [f"certfile {self.tls.cert_file}", f"keyfile {self.tls.key_file}", f"cafile {self.tls.ca_file}"]
        if os.geteuid() == 0:
            lines.append("user root")  # otherwise mosquitto drops to `mosquitto` and cannot read our tmp files
        if self.users:
            passwd = self.workdir / "passwd"
            passwd.write_text("".join(f"{user}:{password}\n" for user, password in self.users.items()))
            passwd.chmod(0o600)
            subprocess.run(["mosquitto_passwd", "-U", str(passwd)], check=True, capture_output=True)
            lines += ["allow_anonymous false", f"password_file {passwd}"]
        else:
            lines.append("allow_anonymous true")
        if self.acl is not None:
            acl_path = self.workdir / "acl"
            acl_path.write_text(self.acl)
            acl_path.chmod(0o600)
            lines.append(f"acl_file {acl_path}")
        if self.extra_config:
            lines.append(self.extra_config)
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(self) -> "MosquittoBroker":
        """Start mosquitto (same port as before on a restart) and wait until it accepts TCP connections."""
        if self.running():
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        out = open(self.workdir / "mosquitto.stdout", "ab")
        try:
            self._proc = subprocess.Popen(
                [self._binary, "-c", str(self.config_path)], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            out.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(f"mosquitto exited with {self._proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.01)
        self.kill()
        raise BrokerError(f"mosquitto did not listen on {self.host}:{self.port} within {self.start_timeout_s}s")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop gracefully (SIGTERM); clients see their connection closed."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def kill(self) -> None:
        """Kill with SIGKILL (a crashed broker)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def restart(self, *, kill: bool = False, down_s: float = 0.0) -> None:
        """Stop (or kill) and start again on the same port, optionally staying down for `down_s` seconds."""
        self.kill() if kill else self.stop()
        if down_s > 0:
            time.sleep(down_s)
        self.start()

    def log_text(self) -> str:
        """The broker log so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        stdout = self.workdir / "mosquitto.stdout"
        text = self.log_text() + (stdout.read_text(errors="replace") if stdout.exists() else "")
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        """Stop the broker and remove the tmp dir (if this object created it)."""
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "MosquittoBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_broker_for_test(**kwargs) -> MosquittoBroker:
    """A started private mosquitto (`MosquittoBroker(**kwargs)`) for a test fixture; when it cannot run here the test
    is skipped, or fails with the original error under TOY_REQUIRE_SERVICES=1 (testing.services)."""
    from .services import service_unavailable

    try:
        return MosquittoBroker(**kwargs).start()
    except (BrokerError, OSError) as exc:
        service_unavailable("mosquitto", exc)
        raise  # service_unavailable always raises


def shipped_broker_config(name: str, tmp_path: Path, *, listeners: Mapping[str, str],
                          files: Mapping[str, Path]) -> Path:
    """configs/mosquitto/`name` made runnable in `tmp_path` as shipped otherwise: each listener line in
    `listeners` replaced (e.g. "listener 8883" → "listener 40123 127.0.0.1"), each /etc path in `files` pointed at
    the test's file, its persistence under `tmp_path`, its log on stderr (and, as root, run as root)."""
    conf = (Path(__file__).resolve().parents[2] / "configs" / "mosquitto" / name).read_text()
    for line, replacement in listeners.items():
        conf = conf.replace(line, replacement)
    for shipped, local in files.items():
        conf = conf.replace(shipped, str(local))
    conf = conf.replace("/var/lib/mosquitto/", f"{tmp_path}/").replace("log_dest syslog", "log_dest stderr")
    if os.geteuid() == 0:
        conf += "user root\n"
    path = tmp_path / name
    path.write_text(conf)
    return path


async def wait_for_listener(proc: subprocess.Popen, port: int, *, tries: int = 250) -> None:
    """Until the broker `proc` accepts on `port` (20 ms apart); its stderr in the failure if it died first."""
    import asyncio

    for _ in range(tries):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "the broker exited"
            await asyncio.sleep(0.02)
    raise TimeoutError(f"the broker never listened on {port}")
