"""Running `python -m toy_runtime` as a user would: a clean environment (no TOY_/OPENAI_ variables of the caller)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def clean_env(state_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without settings variables, plus a state dir and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_"))}
    if state_dir is not None:
        env["TOY_STATE_DIR"] = str(state_dir)
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, input_text: str | None = "",
            timeout: float = 120) -> subprocess.CompletedProcess:
    """The command's exit code, stdout and stderr (stdin is `input_text`, empty by default)."""
    return subprocess.run([sys.executable, "-m", "toy_runtime", *args], input=input_text, capture_output=True,
                          text=True, env=env if env is not None else clean_env(), timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The single `toy-runtime: ...` line a user error ends with; fails the test on anything else."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and lines[-1].startswith("toy-runtime: ") and len(lines) <= 3, proc.stderr
    return lines[-1][len("toy-runtime: "):]
