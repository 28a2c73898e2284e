"""The device's own time zone, the default of `[session] timezone`: a toy on the kitchen shelf lives in its family's
zone, so "remind me at 7 pm" means 7 pm on the kitchen clock without any setting.

Read in this order: `TZ` (an IANA name, ":Area/City", or a path under a zoneinfo directory), then the system's
configuration through `tzlocal` (`/etc/localtime`, `/etc/timezone`, `timedatectl`'s files); "UTC" when neither
names a zone Python knows.
"""

from __future__ import annotations

import logging
import os
from zoneinfo import ZoneInfo

log = logging.getLogger(__name__)

FALLBACK = "UTC"


def _known(name: str | None) -> str | None:
    """`name` when it is an IANA zone Python can load, else None."""
    if not name:
        return None
    try:
        ZoneInfo(name)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError for paths, TypeError for junk
        log.debug("%r is not a time zone Python can load: %s: %s", name, type(exc).__name__, exc)
        return None
    return name


def _from_tz_variable(value: str) -> str | None:
    """The IANA name in a TZ value: "Asia/Shanghai", ":Asia/Shanghai", "/usr/share/zoneinfo/Asia/Shanghai"."""
    value = value.strip().removeprefix(":")
    if "zoneinfo/" in value:
        value = value.split("zoneinfo/", 1)[1]
    return _known(value)


def system_timezone() -> str:
    """The device's IANA zone name (module docstring says where it is read); "UTC" when none is configured."""
    tz_variable = os.environ.get("TZ")
    if tz_variable:
        name = _from_tz_variable(tz_variable)
        if name:
            return name
        # a POSIX rule like "CST-8" has no IANA name: the system files decide, and the owner is told why
        log.warning("TZ=%r is not an IANA zone name; using the system's zone", tz_variable)
    try:
        from tzlocal import get_localzone_name

        return _known(get_localzone_name()) or FALLBACK
    except Exception as exc:  # no zone configured at all (a bare container), or conflicting files: UTC, as before
        log.debug("the system names no usable time zone (%s: %s); using %s", type(exc).__name__, exc, FALLBACK)
        return FALLBACK
