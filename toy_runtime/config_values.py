"""Value rules shared by the settings sections: text from the environment read as the choice it names, URLs, and
`HOST:PORT` listen addresses (whether a host is loopback: then the web console needs no token).

Kept out of config.py so the settings tree stays a list of fields; config.py wraps these in its validators.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal, get_args, get_origin


def literal_from_text(annotation: Any, value: Any) -> Any:
    """`value` converted for a `Literal[...]` field: "20" for a choice of numbers, 5 for a choice of strings.

    An environment variable is always text (`TOY_AUDIO__FRAME_MS=20`) and TOML may write `protocol = 5`; pydantic
    compares literals strictly, so without this both are refused although they name a valid choice.
    """
    if get_origin(annotation) is not Literal or isinstance(value, bool):
        return value
    choices = get_args(annotation)
    if isinstance(value, str) and all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        try:
            return int(value.strip())
        except ValueError:
            return value
    if isinstance(value, (int, float)) and all(isinstance(c, str) for c in choices):
        return str(value)
    return value


def check_url(value: str | None, schemes: tuple[str, ...], example: str) -> str | None:
    """A URL with one of `schemes`, a host and a port from 1 to 65535 if any (None and "" mean unset)."""
    if not value:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise ValueError(f"must start with {' or '.join(s + '://' for s in schemes)} (e.g. {example})")
    if not parts.hostname:
        raise ValueError(f"no host in the URL (e.g. {example})")
    try:
        port = parts.port  # None: the scheme's default port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"the port must be a number from 1 to 65535 (e.g. {example})")
    return value


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
