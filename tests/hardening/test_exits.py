"""Clean exits: SIGTERM (a cancelled CI job) cleans up as SIGINT does, and so does every normal exit.

Token files hold live credentials of the target; temporary databases are megabytes each. Every
test runs the tool with its own ``TMPDIR`` and looks there afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.sim.served import served_file



def _env(tmp: Path) -> dict[str, str]:
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


def _left(tmp: Path, pattern: str) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob(pattern))


def test_sigterm_mid_run_leaves_no_token_file(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    config = tmp_path / "target.toml"
    with served_file(tmp_path / "ref.sqlite", config):
        run = subprocess.Popen([sys.executable, "-m", "conformance.cli", "run", "--config", str(config),
                                "--report-dir", str(tmp_path / "report"), "--seed", "1"],
                               env=_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not _left(tmp, "identity-*.token") and time.monotonic() < deadline and run.poll() is None:
                time.sleep(0.05)
            assert _left(tmp, "identity-*.token"), "the run never provisioned"
            time.sleep(1.0)  # well inside the run: checks running, more identities on the way
            run.send_signal(signal.SIGTERM)
            out, err = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
    assert _left(tmp, "identity-*.token") == [], err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert run.returncode != 0


def test_diff_removes_its_embedded_database_on_a_clean_exit(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "diff", "--report-dir", str(tmp_path / "report"),
                           "--seed", "1", "--steps", "20"], env=_env(tmp), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _left(tmp, "*.sqlite*") == [] and list(tmp.iterdir()) == [], _left(tmp, "*")


def test_sigterm_mid_simulation_removes_its_databases(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    run = subprocess.Popen([sys.executable, "-m", "simulations.cli", "run", "--seed", "3", "--budget", "60",
                            "--out", str(tmp_path / "out")], env=_env(tmp), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _left(tmp, "*.sqlite*") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert list(tmp.iterdir()) == [], _left(tmp, "*")
    assert "Traceback" not in err and run.returncode == 130, (run.returncode, err[-2000:])
