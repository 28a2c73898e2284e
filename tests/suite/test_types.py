"""The package type-checks: mypy (with the pydantic plugin, as configured in pyproject.toml `[tool.mypy]`) reports no
error on `toy_runtime` and `firmware_bridge`. CI runs the whole suite, so an annotation that lies fails the build.

mypy runs in a child process in the project's folder, with its incremental cache in the project's `.mypy_cache`:
the first run checks every module (~15 s), later runs only what changed (~2 s)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a subprocess, ~15 s on a cold cache: outside the fast lane
def test_mypy_reports_no_error_on_the_package():
    # the configured targets (`packages`) and plugin are read from pyproject.toml in cwd; the copy checked is the one
    # in this folder (mypy looks in cwd before site-packages, where an editable install may point elsewhere)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert "No module named mypy" not in proc.stderr, "mypy is missing: pip install -e '.[test]'"
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    checked = re.search(r"no issues found in (\d+) source files", proc.stdout)
    assert checked, proc.stdout[-2000:]
    assert int(checked.group(1)) > 200  # the whole package, not a stray target
