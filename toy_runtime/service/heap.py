"""Give freed heap memory back to the operating system (glibc's `malloc_trim`).

Loading the engines allocates and frees big temporary buffers (onnxruntime parses the whole voice file; the
recognizer builds its search tables). glibc keeps those freed pages resident, so a process that has finished
loading looks ~30 MB bigger than what it holds (300 → 271 MB measured for `toy-runtime run`). Trimming once after
loading, and after each synthesized answer, keeps the toy's resident memory at what it really uses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable

# Big blocks (≥ 4 MiB: a long sentence's synthesis tensors) always come from mmap and go back to the OS the moment
# they are freed. glibc's default raises this threshold each time such a block is freed (up to 32 MB), after which
# the next big blocks land in the heap and fragment it: +30 MB resident after the first turns with a search and a
# reminder, for good (measured, the voice bench's mixed session). Not lower: at 128 KiB-1 MiB every synthesis
# faults in fresh pages for its mid-sized tensors, +10-13 ms per clause (measured); at 4 MiB it costs nothing.
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
# Two malloc arenas instead of one per thread (ASR, TTS, PortAudio, HTTP, onnxruntime's pool): less RSS for the
# same data. The systemd unit's MALLOC_ARENA_MAX=2 says the same for processes started elsewhere.
ARENA_MAX = 2

# The systemd unit's allocator (systemd/toy-runtime.service; tests/service/test_unit.py keeps the two the same):
# jemalloc, preloaded, two arenas; big blocks' pages given back when freed, small ones' after a second (the unit
# says why). glibc's malloc kept the vocoder's freed buffers and fragments resident: 313 MB at the peak of the voice
# bench's mixed session against 296 MB (docs/benchmarks.md).
# glibc's mallopt and malloc_trim (tune_heap, trim_heap) then act on glibc's unused heap: harmless, ~µs.
JEMALLOC_ENV = {"LD_PRELOAD": "libjemalloc.so.2",
                "MALLOC_CONF": ("narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0,oversize_threshold:262144,"
                                "background_thread:true")}

__all__ = ["JEMALLOC_ENV", "heap_trimmer", "jemalloc_installed", "trim_heap", "tune_heap"]

# mallopt(3) parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

_TRIM: Callable[[int], int] | None | bool = False  # False: not looked up yet


def heap_trimmer() -> Callable[[int], int] | None:
    """glibc's `malloc_trim(pad)`, or None on a C library without it (musl, macOS)."""
    global _TRIM
    if _TRIM is False:
        try:
            _TRIM = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = None
    return _TRIM  # type: ignore[return-value]


def trim_heap() -> bool:
    """Return freed heap pages to the OS (blocking, 3-20 ms; ctypes drops the GIL meanwhile). False if unsupported."""
    trim = heap_trimmer()
    if trim is None:
        return False
    trim(0)
    return True


def jemalloc_installed() -> bool:
    """Whether the dynamic loader can find JEMALLOC_ENV's library (Debian: libjemalloc2)."""
    return ctypes.util.find_library("jemalloc") is not None


def tune_heap() -> bool:
    """Fix glibc's mmap threshold and cap its arenas (see MMAP_THRESHOLD_BYTES, ARENA_MAX). Call at start-up, before
    the engines' threads exist. An explicit MALLOC_MMAP_THRESHOLD_ / MALLOC_ARENA_MAX in the environment wins. False
    on a C library without mallopt."""
    import os

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    if "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(_M_ARENA_MAX, ARENA_MAX)
    return True
