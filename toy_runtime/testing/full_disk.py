"""A small real file system that tests can fill to the last byte: a tmpfs mounted on a temporary folder.

    with SmallDisk(tmp_path / "disk") as disk:   # mount -t tmpfs -o size=1m (root only)
        disk.fill()                               # write until ENOSPC: not one more byte fits
        disk.free()                               # the filler removed: the space is back
    # unmounted (lazily, so a process that still has a file open cannot keep it mounted)

`SmallDisk(..., read_only=True)` mounts it read-only instead (EROFS on every write). Mounting needs root and a kernel
that allows it (not every container does); `SmallDisk.unavailable()` says why not, and the `small_disk` /
`read_only_disk` fixtures skip with that reason.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

__all__ = ["SmallDisk"]

FILLER = "filler.bin"


class SmallDisk:
    """A tmpfs of `size` (mount(8) syntax) on `path`, mounted on entry and unmounted on exit."""

    def __init__(self, path: Path, *, size: str = "1m", read_only: bool = False) -> None:
        self.path = Path(path)
        self.size = size
        self.read_only = read_only
        self._mounted = False

    @staticmethod
    def unavailable() -> str | None:
        """Why a tmpfs cannot be mounted here, or None when it can be tried."""
        if os.geteuid() != 0:
            return "mounting a small tmpfs needs root (the full-disk tests run as root in CI)"
        return None

    def mount(self) -> None:
        """Mount the tmpfs (RuntimeError with mount's own words when the kernel refuses)."""
        self.path.mkdir(parents=True, exist_ok=True)
        options = f"size={self.size},mode=0755" + (",ro" if self.read_only else "")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(self.path)],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"mount -t tmpfs failed: {proc.stderr.strip() or proc.returncode}")
        self._mounted = True

    def unmount(self) -> None:
        """Unmount (lazily: a child process that still holds a file open must not keep the test's mount)."""
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=30)
            self._mounted = False

    def free_bytes(self) -> int:
        """Bytes an unprivileged writer could still put on the disk."""
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self) -> int:
        """Write a filler file until the disk says ENOSPC; returns its size. Afterwards not one more page fits."""
        written = 0
        block = b"\0" * 4096
        fd = os.open(self.path / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                try:
                    written += os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        """Remove the filler: the space it took is back."""
        (self.path / FILLER).unlink(missing_ok=True)

    def __enter__(self) -> "SmallDisk":
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()
