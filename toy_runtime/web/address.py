"""`HOST:PORT` of the console's listening socket, and whether a host is loopback (then no token is needed)."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback", "parse_listen"]


def parse_listen(value: str) -> tuple[str, int]:
    """`127.0.0.1:8088`, `localhost:8088` or `[::1]:8088` → (host, port); ValueError with the reason."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host:
        raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:8088")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("write an IPv6 address in brackets, e.g. [::1]:8088")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range (0-65535)")
    return host, port


def is_loopback(host: str) -> bool:
    """True for `localhost` and addresses in 127.0.0.0/8 or ::1; a name other than localhost is not trusted to be."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
