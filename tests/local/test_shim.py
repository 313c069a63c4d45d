"""`aidememo-ref shim`: an opt-in `aidememo` that runs the kit and never shadows a real one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, Cli


@pytest.fixture
def kit_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `aidememo-ref` executable for the shim to point at (what an install puts on PATH)."""
    bin_dir = tmp_path / "kit-bin"
    bin_dir.mkdir()
    program = bin_dir / "aidememo-ref"
    program.write_text(f"#!/bin/sh\nexec {sys.executable} -m aidememo_ref \"$@\"\n")
    program.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(program)])  # how the installed entry point is started
    return program


def test_install_writes_a_shim_that_runs_the_kit_and_remove_takes_it_away(cli: Cli, tmp_path: Path, kit_bin: Path) -> None:
    target = tmp_path / "bin"
    out = cli.ok("shim", "install", "--dir", str(target), env={"PATH": "/usr/bin:/bin"}).out.splitlines()
    shim = target / "aidememo"
    assert out == [f"Installed {shim} -> {kit_bin}", f'Add it to PATH: export PATH="{target}:$PATH"']
    assert os.access(shim, os.X_OK)
    env = {"PATH": f"{target}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    done = subprocess.run(["aidememo", "--store", str(tmp_path / "s.sqlite"), "session", "new", "Topic"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("# aidememo session: Topic\n"), done.stderr
    assert cli.ok("shim", "install", "--dir", str(target), env={"PATH": f"{target}:/usr/bin"}).out == (
        f"Installed {shim} -> {kit_bin}\n")  # reinstalling over its own shim is fine
    assert cli.ok("shim", "remove", "--dir", str(target)).out == f"Removed {shim}\n"
    assert not shim.exists()
    assert cli.refused("shim", "remove", "--dir", str(target)) == (
        f"invalid input: {shim} is not an aidememo-ref shim; nothing removed")


def test_install_never_shadows_or_overwrites_a_real_aidememo(cli: Cli, tmp_path: Path, kit_bin: Path) -> None:
    upstream = tmp_path / "upstream-bin"
    upstream.mkdir()
    (upstream / "aidememo").write_text("#!/bin/sh\necho upstream\n")
    (upstream / "aidememo").chmod(0o755)
    target = tmp_path / "bin"
    assert cli.refused("shim", "install", "--dir", str(target), env={"PATH": f"{upstream}:/usr/bin"}) == (
        f"invalid input: an aidememo is already on PATH at {upstream / 'aidememo'}; keep it and set AIDEMEMO_BIN"
        " for the kit, or pass --force")
    assert cli.refused("shim", "install", "--dir", str(upstream), env={"PATH": "/usr/bin"}) == (
        f"invalid input: {upstream / 'aidememo'} exists and is not an aidememo-ref shim; pass --force to replace it")
    assert (upstream / "aidememo").read_text() == "#!/bin/sh\necho upstream\n"
    cli.ok("shim", "install", "--dir", str(target), "--force", env={"PATH": f"{upstream}:/usr/bin"})
    assert (target / "aidememo").exists()
