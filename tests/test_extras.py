"""The optional parts fail politely: a command that needs an extra that is not installed prints one
line with the pip command that adds it and exits 2, before it starts anything.

"Not installed" is made real in a subprocess: a ``sitecustomize`` puts a finder first on
``sys.meta_path`` that answers ``ModuleNotFoundError`` for the extra's modules, as an
environment without them does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from refkit.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]

BLOCKER = '''
import sys

BLOCKED = {blocked!r}


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


def _python(tmp_path: Path, extra: str, code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``tmp_path`` with the modules of ``extra`` not installed."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(EXTRAS[extra])))
    environ = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environ, capture_output=True, text=True,
                          timeout=120)


def _without(tmp_path: Path, extra: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``argv[0]``'s ``argv[1]`` (a command line's main) called with the rest, without ``extra``."""
    return _python(tmp_path, extra, f"import sys; from {argv[0]} import {argv[1]} as main; sys.exit(main({argv[2:]!r}))",
                   env)


def _assert_polite(result: subprocess.CompletedProcess[str], extra: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(f"python3 -m pip install 'aidememo-conformance[{extra}]'"), lines[0]
    assert "Traceback" not in result.stdout + result.stderr


def test_the_blocker_makes_the_modules_unimportable(tmp_path: Path) -> None:
    """Without this the other tests would prove nothing: their modules are installed here."""
    for extra, modules in EXTRAS.items():
        for module in modules:
            assert f"No module named '{module}'" in _python(tmp_path, extra, f"import {module}").stderr


@pytest.mark.parametrize("argv", [
    ["run", "--workers", "2", "--budget", "1"],
    ["run", "--scheduler", "tcp://127.0.0.1:9", "--budget", "1"],
    ["clients", "--clients", "2", "--workers", "2"],
    ["xmemo", "run", "--workers", "2"],
], ids=["run-workers", "run-scheduler", "clients-workers", "xmemo-workers"])
def test_a_hunt_without_dask_names_the_hunt_extra(tmp_path: Path, argv: list[str]) -> None:
    result = _without(tmp_path, "hunt", ["simulations.cli", "main", *argv])
    _assert_polite(result, "hunt")
    assert not (tmp_path / "sim-failures").exists()  # refused before anything ran


def test_one_process_needs_no_dask(tmp_path: Path) -> None:
    result = _without(tmp_path, "hunt", ["simulations.cli", "main", "run", "--workers", "1", "--batches", "1",
                                         "--seed", "1", "--out", str(tmp_path / "out")])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("verb", ["serve", "bootstrap"])
def test_the_reference_on_postgres_without_psycopg_names_the_postgres_extra(tmp_path: Path, verb: str) -> None:
    argv = ["aidememo_cli", "main", verb, "--canonical-backend", "postgres", "--postgres-transport", "insecure-no-tls"]
    if verb == "serve":
        argv += ["--artifact-backend", "disabled"]
    else:
        argv += ["--tenant-id", "t", "--project-id", "p", "--actor-id", "a", "--token-file", str(tmp_path / "tok")]
    result = _without(tmp_path, "postgres", argv, env={"AIDEMEMO_POSTGRES_URL": "postgresql://127.0.0.1:9/none"})
    _assert_polite(result, "postgres")
    assert result.stderr.startswith("error: --canonical-backend postgres needs psycopg")


def test_upstream_refusals_come_before_the_missing_driver(tmp_path: Path) -> None:
    """Upstream's own refusal (TLS not implemented) is what a bad invocation meets first."""
    result = _without(tmp_path, "postgres", ["aidememo_cli", "main", "serve", "--canonical-backend", "postgres",
                                             "--artifact-backend", "disabled"])
    assert result.returncode == 1 and "PostgreSQL TLS is required" in result.stderr


def test_the_embedded_reference_on_postgres_without_psycopg_names_the_postgres_extra(tmp_path: Path) -> None:
    result = _without(tmp_path, "postgres", ["conformance.cli", "main", "run", "--backend", "postgres"],
                      env={"AIDEMEMO_POSTGRES_URL": "postgresql://127.0.0.1:9/none"})
    _assert_polite(result, "postgres")
    assert not (tmp_path / "aidememo-report").exists()


def test_the_library_says_the_same(tmp_path: Path) -> None:
    code = ("import aidememo_ref\n"
            "try:\n"
            "    aidememo_ref.ReferenceLedger(postgres_url='postgresql://127.0.0.1:9/none')\n"
            "except ImportError as exc:\n"
            "    print(exc)\n")
    result = _python(tmp_path, "postgres", code)
    assert result.stdout.strip().endswith("python3 -m pip install 'aidememo-conformance[postgres]'"), result
