"""The package type-checks: mypy (with the pydantic plugin, as configured in pyproject.toml `[tool.mypy]`) reports no
error on `toy_runtime` and `firmware_bridge`. CI runs the whole suite, so an annotation that lies fails the build.

mypy runs in a child process in the project's folder, with its incremental cache in the project's `.mypy_cache`:
the first run checks every module (~15-25 s of one core), later runs only what changed (~2 s). Run in one process
(`python -m pytest -q`), the suite keeps one core busy, so when this test is selected mypy is started as collection
ends (`tests/conftest.py`) and runs beside the tests before it on the other core; the test then only reads its
result. In two workers (`-n 2`) the test runs mypy itself, in its worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_ID = "tests/suite/test_types.py::test_mypy_reports_no_error_on_the_package"


def start_mypy() -> subprocess.Popen[str]:
    """mypy on the configured targets in the project's folder, started now (its output read by the test)."""
    # the configured targets (`packages`) and plugin are read from pyproject.toml in cwd; the copy checked is the one
    # in this folder (mypy looks in cwd before site-packages, where an editable install may point elsewhere)
    return subprocess.Popen([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # a subprocess, ~15 s on a cold cache: outside the fast lane
def test_mypy_reports_no_error_on_the_package(request):
    proc = request.config.stash.get(EARLY_MYPY, None) or start_mypy()
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "No module named mypy" not in stderr, "mypy is missing: pip install -e '.[test]'"
    assert proc.returncode == 0, stdout[-6000:] + stderr[-2000:]
    checked = re.search(r"no issues found in (\d+) source files", stdout)
    assert checked, stdout[-2000:]
    assert int(checked.group(1)) > 200  # the whole package, not a stray target


EARLY_MYPY = pytest.StashKey[subprocess.Popen]()
