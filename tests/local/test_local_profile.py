"""The aidememo-local conformance profile: it passes this kit's CLI, and every check bites.

The kill matrix runs each broken CLI (``local_mutants.py``) through ``aidememo-conformance run
--profile aidememo-local --cli ...`` with the requirements the mutant breaks, and demands that
exactly those FAIL, with the reports and verdicts of any profile.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from conformance.cli import main

from .local_mutants import MUTANTS

MUTANT_CLI = Path(__file__).with_name("local_mutants.py")
REQUIREMENTS = ["AML-CAS-1", "AML-CAS-2", "AML-CLAIM-1", "AML-CLAIM-2", "AML-CLAIM-3", "AML-RET-1", "AML-RET-2",
                "AML-RET-3", "AML-RET-4", "AML-RUN-1", "AML-VIS-1", "AML-VIS-2", "AML-MCP-1",
                # the remote capability's checks; their broken CLIs are tests/remote/remote_mutants.py
                "AML-REM-1", "AML-REM-2", "AML-REM-3", "AML-REM-4", "AML-REM-5"]
# mutant -> the requirements it breaks (and that the profile must therefore fail)
KILLS = {
    "no_cas": ["AML-CAS-1", "AML-CAS-2"],
    "same_claim_writes": ["AML-CLAIM-1"],
    "claim_overwrite": ["AML-CLAIM-2"],
    "no_reclaim_attempt": ["AML-CLAIM-3"],
    "no_attach_check": ["AML-RET-1"],
    "no_source_check": ["AML-RET-2"],
    "no_author_check": ["AML-RET-3"],
    "return_rewrites": ["AML-RET-4"],
    "run_accepts_manual": ["AML-RUN-1"],
    "inbox_leak": ["AML-VIS-1"],
    "status_open": ["AML-VIS-2"],
    "mcp_fact_add_drops_session": ["AML-MCP-1"],
}


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, dict[str, str]]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # main sets it; restored afterwards
    code = main(["run", "--profile", "aidememo-local", "--seed", "7", *argv])
    results = json.loads((tmp_path / "aidememo-report" / "results.json").read_text())
    return code, {r["requirement"]: r["verdict"] for r in results["records"]}


def test_every_requirement_has_a_check_and_every_check_a_mutant_that_kills_it() -> None:
    from conformance.installed import load_profile

    registry = load_profile("aidememo-local").registry()
    assert sorted(registry.requirements) == sorted(REQUIREMENTS)
    local = [r for r in REQUIREMENTS if not r.startswith("AML-REM-")]  # tests/remote/test_remote_profile.py
    assert sorted(r for kills in KILLS.values() for r in kills) == sorted(local)
    assert sorted(KILLS) == sorted(MUTANTS)


def test_the_kits_cli_passes_every_requirement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, verdicts = _run(tmp_path, monkeypatch)
    assert verdicts == {requirement: "PASS" for requirement in REQUIREMENTS}
    assert code == 0


@pytest.mark.parametrize("mutant", sorted(KILLS))
def test_a_broken_cli_fails_by_the_requirement_it_breaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          mutant: str) -> None:
    cli = shlex.join([sys.executable, str(MUTANT_CLI), mutant])
    selected = [flag for requirement in KILLS[mutant] for flag in ("--requirement", requirement)]
    # The mcp capability is claimed, not probed: the clean run above shows the probe works.
    code, verdicts = _run(tmp_path, monkeypatch, "--cli", cli, "--capability", "mcp", *selected)
    assert verdicts == {requirement: "FAIL" for requirement in KILLS[mutant]}, verdicts
    assert code == 1
