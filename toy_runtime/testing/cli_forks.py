"""Many runs of the `toy-runtime` command for the price of one interpreter start: a child imports the CLI once, then
forks a process per run.

Each run is still a process of its own, with its own environment, exit code, stdout and stderr, running the same
`main()` as `python -m toy_runtime`; only the interpreter's start-up and the imports are shared (~1 s of a busy core
each, measured: the settings walk's ~100 runs took 81 s under load). For tests that run the command many times with
different settings; a test of start-up or of the entry point itself spawns `python -m toy_runtime`.

    with ForkedCli() as cli:
        proc = cli.run("config", "check", env={"TOY_VAD__HANGOVER_MS": "-1", ...})

Protocol (stdin/stdout of the child, one JSON object a line): {"args": [...], "env": {...}, "timeout_s": 120} →
{"returncode": int, "stdout": str, "stderr": str}.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any

__all__ = ["ForkedCli"]

# what `config check` and the other quick commands import: loaded once, before the first fork
PRELOAD = ("toy_runtime.cli", "toy_runtime.cli.commands", "toy_runtime.config", "toy_runtime.service.logs")


class ForkedCli:
    """A child interpreter with the CLI imported that forks one process per `run`; close it (or use `with`)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

    def run(self, *args: str, env: dict[str, str], timeout_s: float = 120) -> subprocess.CompletedProcess:
        """Run `toy-runtime ARGS` in a fresh fork with exactly `env` (stdin empty); its exit code and output."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"args": list(args), "env": env, "timeout_s": timeout_s}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the CLI fork server ended (exit {self._proc.wait()})")
        reply = json.loads(line)
        return subprocess.CompletedProcess(["toy-runtime", *args], reply["returncode"], reply["stdout"],
                                           reply["stderr"])

    def close(self) -> None:
        """End the server (its forks have all been waited for)."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _child(request: dict[str, Any], out_fd: int, err_fd: int) -> None:
    """In the fork: become `toy-runtime ARGS` with the request's environment and files, run, and exit. Never returns."""
    code = 1
    try:
        signal.alarm(max(1, int(request["timeout_s"])))  # a hung run dies with SIGALRM: the server carries on
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [os.path.join(os.path.dirname(__file__), "..", "__main__.py"), *request["args"]]
        from toy_runtime.cli import main

        try:
            code = main(request["args"])
        except SystemExit as exc:  # what `sys.exit` in `python -m toy_runtime` would make of it
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or file: nothing left to say it on, the child exits
                pass
        os._exit(code if isinstance(code, int) else 1)


def serve() -> None:
    """The server loop: one request line in, one fork, one reply line out, until stdin ends."""
    for name in PRELOAD:
        importlib.import_module(name)
    replies = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            replies.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, out.fileno(), err.fileno())
            _, status = os.waitpid(pid, 0)
            out.seek(0)
            err.seek(0)
            reply = {"returncode": os.waitstatus_to_exitcode(status),
                     "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
