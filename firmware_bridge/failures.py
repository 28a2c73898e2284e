"""Why a connection attempt failed, said in one line, and whether retrying could ever help.

paho reports a failed attempt without its cause (`on_connect_fail(client, userdata)`), and a plain `mqtt://` URL
pointed at a TLS port only shows up as "connection closed before CONNACK". This module names the cause:

- an untrusted broker certificate or a failed TLS handshake is a configuration error (permanent);
- a port that answers in the other dialect (TLS vs plain MQTT) is found by one short probe (permanent);
- refused, reset, timed out, unreachable, unresolvable: the broker may come (back) later (transient).

Permanent failures end the retries only before the first good connection (a start-up configuration error); once an
endpoint has been connected, every failure is retried, because a broker that goes away and comes back is normal.
"""

from __future__ import annotations

import socket
import ssl
import uuid
from dataclasses import dataclass

from .config import MqttUrl

PROBE_TIMEOUT_S = 2.0  # one probe per start-up failure; a local broker answers in milliseconds


@dataclass(frozen=True)
class ConnectFailure:
    """One failed attempt: a stable `code`, a one-line `message`, and whether retrying cannot fix it."""

    code: str  # tls_certificate | tls_handshake | tls_required | tls_not_spoken | refused | reset | timeout | ...
    message: str
    permanent: bool


def where(broker: MqttUrl) -> str:
    return f"{broker.host}:{broker.port}"


def classify(exc: BaseException | None, broker: MqttUrl, ca_file: str | None, *, probe: bool = True) -> ConnectFailure:
    """The failure behind an exception raised while opening the connection (TCP connect and TLS handshake).
    `probe=False` skips the dialect probe (after a good connection the dialect is known to be right)."""
    at = where(broker)
    if isinstance(exc, ssl.SSLCertVerificationError):
        source = f"ca_file {ca_file}" if ca_file else "the system CAs (no ca_file given)"
        return ConnectFailure("tls_certificate", f"TLS: the certificate of {at} is not trusted by {source}: "
                                                 f"{exc.verify_message or exc.reason}", permanent=True)
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, ConnectionAbortedError)) \
            and broker.tls:
        # the peer hung up during the TLS handshake: a plain MQTT listener does exactly that
        if probe and speaks_plain_mqtt(broker.host, broker.port):
            return ConnectFailure("tls_not_spoken", f"{at} speaks plain MQTT, not TLS: use an mqtt:// URL",
                                  permanent=True)
        return ConnectFailure("reset", f"{at} closed the connection during the TLS handshake", permanent=False)
    if isinstance(exc, ssl.SSLError):
        return ConnectFailure("tls_handshake", f"TLS handshake with {at} failed: {exc.reason or exc}",
                              permanent=True)
    if isinstance(exc, ConnectionRefusedError):
        return ConnectFailure("refused", f"connection to {at} refused (is the broker running on that port?)",
                              permanent=False)
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError)):
        return ConnectFailure("reset", f"{at} reset the connection", permanent=False)
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return ConnectFailure("timeout", f"no answer from {at} (timed out)", permanent=False)
    if isinstance(exc, socket.gaierror):
        return ConnectFailure("unresolved", f"cannot resolve {broker.host}: {exc.strerror or exc}", permanent=False)
    if isinstance(exc, OSError):
        return ConnectFailure("unreachable", f"cannot reach {at}: {exc.strerror or exc}", permanent=False)
    return ConnectFailure("unreachable", f"cannot reach {at}", permanent=False)


def closed_before_connack(broker: MqttUrl, *, probe: bool = True) -> ConnectFailure:
    """The broker closed the connection before answering CONNECT. On a plain URL, a TLS listener does that."""
    at = where(broker)
    if probe and not broker.tls and speaks_tls(broker.host, broker.port):
        return ConnectFailure("tls_required", f"{at} expects TLS: use an mqtts:// URL (and its CA as ca_file)",
                              permanent=True)
    return ConnectFailure("closed", f"{at} closed the connection before answering CONNECT", permanent=False)


def speaks_tls(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True if `host:port` completes a TLS handshake (certificate not checked: only the dialect matters here)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            with context.wrap_socket(sock, server_hostname=host):
                return True
    except (OSError, ValueError):
        return False


def speaks_plain_mqtt(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True if `host:port` answers an MQTT 3.1.1 CONNECT with a CONNACK in the clear (accepted or not)."""
    client_id = f"probe-{uuid.uuid4().hex[:8]}".encode()
    variable = b"\x00\x04MQTT\x04\x02\x00\x05"  # protocol name, level 4, clean session, keepalive 5 s
    body = variable + len(client_id).to_bytes(2, "big") + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(bytes([0x10, len(body)]) + body)
            first = sock.recv(1)
            if first[:1] == b"\x20":
                try:
                    sock.sendall(b"\xe0\x00")  # DISCONNECT: leave no will and no noise behind
                except OSError:
                    pass
                return True
            return False
    except OSError:
        return False
