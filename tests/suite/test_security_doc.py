"""docs/security.md names, for every defence, the test that proves it: each named test must exist, so a renamed or
deleted test cannot leave the threat model pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"


def _references() -> list[tuple[str, str]]:
    """(file, test name) for every `tests/…py::name` and every `::name` that continues the last file named."""
    refs = []
    current = None
    for match in re.finditer(r"`(tests/[\w/]+\.py)?(::(\w+))?", DOC.read_text()):
        path, _, name = match.groups()
        if path:
            current = path
        if name and current:
            refs.append((current, name))
    return refs


def test_every_test_the_threat_model_names_exists():
    refs = _references()
    assert len(refs) >= 40, refs  # the table is read, not skipped
    missing = []
    for path, name in refs:
        source = ROOT / path
        if not source.exists() or not re.search(rf"^(async )?def {name}\b", source.read_text(), re.M):
            missing.append(f"{path}::{name}")
    assert not missing, "docs/security.md names tests that do not exist: " + ", ".join(missing)


def test_the_readme_links_the_threat_model():
    assert "docs/security.md" in (ROOT / "README.md").read_text()
