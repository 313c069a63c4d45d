"""mypy --strict over the kit's three packages, in the default test run (and so in CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_packages_are_mypy_strict_clean() -> None:
    # The configuration (packages, strict) is pyproject.toml's [tool.mypy]; nothing is passed here
    # so that `python -m mypy` in the checkout and this test can never disagree.
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout[-6000:]}{done.stderr[-2000:]}"
    assert "Success: no issues found" in done.stdout, done.stdout
