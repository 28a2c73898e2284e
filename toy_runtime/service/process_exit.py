"""How the `toy-runtime` process ends once its own teardown is done.

Normally through `sys.exit`. But a native library that runs its own threads (livekit's FFI runtime behind the echo
canceller: a tokio pool that forwards its logs into Python every second) can be caught mid-call by the interpreter's
finalization or by the C++ static destructors after it. Python then ends such a thread with `pthread_exit`, which a
Rust frame cannot unwind through, and the process aborts with SIGABRT instead of its exit code (seen once in CI:
exit -6 after a clean "start-up could not finish", so systemd would have logged a crash and kept a core dump). Once
such a library is loaded the process leaves with `os._exit` after doing what finalization would have done for us:
non-daemon threads joined, logs flushed, standard streams flushed.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import NoReturn

__all__ = ["exit_process", "native_threads_loaded", "skip_finalization"]

_reasons: list[str] = []


def skip_finalization(reason: str) -> None:
    """Record that a loaded library runs native threads that call into Python: `exit_process` must not finalize."""
    if reason not in _reasons:
        _reasons.append(reason)


def native_threads_loaded() -> list[str]:
    """Why the process will skip the interpreter's finalization (empty: it will not)."""
    return list(_reasons)


def exit_process(code: int) -> NoReturn:
    """End the process with `code`: `sys.exit`, or `os._exit` after the same flushing when native threads run."""
    if not _reasons:
        sys.exit(code)
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and not thread.daemon:
            thread.join()  # what the interpreter would wait for before exiting
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a reader that left, or a stream already closed: nothing more can reach it
    os._exit(code)
