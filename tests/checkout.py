"""Files the kit's command-line and demo tests make: secret files as users keep them, and a copy
of the checkout with one rule broken (the demos must name the step that catches it)."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["sabotaged_checkout", "secret_file"]

REPO = Path(__file__).resolve().parents[1]


def secret_file(folder: Path, name: str, secret: str, mode: int = 0o600) -> Path:
    """A token or key file as an editor leaves it (CRLF line end), with ``mode``."""
    path = folder / name
    path.write_text(secret + "\r\n")
    path.chmod(mode)
    return path


# The packages a demo runs (the command line and everything under it).
PACKAGES = ("aidememo_cli", "aidememo_client", "aidememo_ref", "aidememo_wire", "refkit", "xmemo_ref")


def sabotaged_checkout(tmp_path: Path, module: str, guard: str, replacement: str = "    if False:\n") -> Path:
    """A copy of the kit's packages and ``scripts`` under ``tmp_path/checkout`` whose ``module`` (a
    path from the repository root) has the line ``guard`` replaced; fails when the guard is no
    longer there."""
    copy = tmp_path / "checkout"
    for package in PACKAGES:
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "scripts", copy / "scripts")
    rules = copy / module
    source = rules.read_text()
    assert source.count(guard) == 1, f"{module} no longer has the guard {guard.strip()!r}"
    rules.write_text(source.replace(guard, replacement))
    return copy
