"""How the process ends (service/process_exit.py): the exit code always arrives, and when finalization is skipped for a
native runtime, what finalization would have done still happens — threads joined, buffered logs and output flushed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # child interpreters, one of them with livekit's runtime

SCRIPT = textwrap.dedent("""
    import atexit, logging, logging.handlers, sys, threading, time
    from toy_runtime.service.process_exit import exit_process, skip_finalization

    if sys.argv[1] == "native":
        skip_finalization("a test's native runtime")
    atexit.register(lambda: print("finalized", flush=True))
    # a log record held in memory until the logging system shuts down
    held = logging.handlers.MemoryHandler(100, flushLevel=logging.CRITICAL,
                                          target=logging.StreamHandler(sys.stderr))
    logging.getLogger("test").addHandler(held)
    logging.getLogger("test").warning("held record")
    threading.Thread(target=lambda: (time.sleep(0.3), print("late thread", flush=True))).start()
    print("buffered, no newline", end="")
    exit_process(int(sys.argv[2]))
""")


def run(mode: str, code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode, str(code)], capture_output=True, text=True, timeout=60)


def test_an_ordinary_process_exits_through_the_interpreter():
    done = run("plain", 3)
    assert done.returncode == 3, done.stderr
    assert "finalized" in done.stdout and "late thread" in done.stdout and "buffered, no newline" in done.stdout
    assert "held record" in done.stderr


def test_with_a_native_runtime_loaded_the_code_and_the_output_still_arrive_without_finalization():
    done = run("native", 1)
    assert done.returncode == 1, done.stderr
    assert "late thread" in done.stdout, done.stdout  # the non-daemon thread was waited for
    assert "buffered, no newline" in done.stdout  # stdout flushed
    assert "held record" in done.stderr  # the logging system shut down
    assert "finalized" not in done.stdout  # the interpreter's exit phase, where the abort happened, never ran


def test_the_echo_canceller_marks_the_process():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from toy_runtime.service.process_exit import native_threads_loaded
        from toy_runtime.adapters.webrtc_apm import WebRtcAudioProcessor
        assert not native_threads_loaded()
        WebRtcAudioProcessor(16000)
        print(native_threads_loaded())
    """)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "livekit" in done.stdout
