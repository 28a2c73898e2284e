"""Value rules shared by the settings sections: text from the environment read as the choice it names, and URLs.

Kept out of config.py so the settings tree stays a list of fields; config.py wraps these in its validators.
"""

from __future__ import annotations

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
