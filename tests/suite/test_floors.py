"""The floors of docs/ARCHITECTURE.md, enforced: import-linter's contracts in pyproject.toml (an import only runs
down; adapters and fakes only from the composition roots; the kernel never names an event; the firmware bridge
stands alone) hold on the package — and would catch an import that breaks one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint(project: Path) -> subprocess.CompletedProcess:
    # a child process in the project's folder: import-linter finds the packages on sys.path, the config in cwd
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                           "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"],
                          cwd=project, env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=240)


def test_every_contract_is_kept():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "6 kept, 0 broken" in proc.stdout


def test_an_event_kernel_that_named_a_plugin_would_break_the_floors(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in ("toy_runtime", "firmware_bridge"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = tmp_path / "toy_runtime" / "events" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\nfrom ..plugins import device_volume  # noqa\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0
    assert "toy_runtime.events.kernel -> toy_runtime.plugins.device_volume" in proc.stdout
