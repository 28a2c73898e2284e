"""Whether a folder really takes writes, and how much room it has: a probe file, not `os.access`.

`os.access` answers yes to root on a full disk, on a read-only mount and under /proc; only a write says no. The probe
writes one page and fsyncs it, because an empty file still fits on a full disk (it needs an inode, no block) and a
delayed-allocation file system may accept the write and refuse the block only at fsync.

    probe_write(folder)              OSError when the folder does not take a page of data
    free_bytes(folder)               what an ordinary writer could still put there (None when unknown)
    unwritable(key, target, folder, exc)   the one line naming the setting, the path and why (with the free space)
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["LOW_SPACE_BYTES", "PROBE_BYTES", "free_bytes", "human_bytes", "probe_write", "unwritable"]

PROBE_BYTES = 4096  # one page: the smallest write that needs a data block
# Below this, `config check` and `doctor` warn: ~5 MB is one full audit file (5 MB rotation) or about 2,000 turns of
# records and years of reminders, so less means the next day's writes may start failing.
LOW_SPACE_BYTES = 5_000_000


def probe_write(folder: Path) -> None:
    """Create, write a page to, fsync and delete a file in `folder` (which must exist); OSError if any step fails."""
    fd, name = tempfile.mkstemp(prefix=".toy-runtime-probe-", dir=folder)
    try:
        view = memoryview(b"\0" * PROBE_BYTES)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(name)


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer could still use on `folder`'s file system, or None when it cannot be asked."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def human_bytes(count: int) -> str:
    """`0 bytes`, `12 KB`, `3.4 MB`, `1.2 GB` (decimal units, like df -H)."""
    if count < 1000:
        return f"{count} bytes"
    for unit, size in (("GB", 10 ** 9), ("MB", 10 ** 6), ("KB", 10 ** 3)):
        if count >= size:
            return f"{count / size:.1f} {unit}" if count < 100 * size else f"{count // size} {unit}"
    return f"{count} bytes"  # pragma: no cover - every count >= 1000 matched KB


def unwritable(key: str, target: Path, folder: Path, exc: OSError) -> str:
    """The one line for a setting whose folder refused the probe: the key, the path, and the reason in words."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        free = free_bytes(folder)
        room = f"{human_bytes(free)} free" if free is not None else "free space unknown"
        return f"{key}: {target} cannot be written: no space left on the device of {folder} ({room})"
    if exc.errno == errno.EROFS:
        return f"{key}: {target} cannot be written: {folder} is on a read-only file system"
    if exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM):  # e.g. /proc, /sys: a folder that makes no files
        return f"{key}: {target} cannot be written: {folder} does not take new files ({exc.strerror or exc})"
    return f"{key}: {target} cannot be written: {folder}: {exc.strerror or exc}"
