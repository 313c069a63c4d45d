"""The aidememo-local profile's remote checks bite: each broken remote CLI fails by its requirement.

The clean run (this kit's CLI passes every AML-REM requirement) is part of
``tests/local/test_local_profile.py``'s full-profile run; here each mutant of
``remote_mutants.py`` runs through ``aidememo-conformance run --profile aidememo-local --cli ...``
with the requirement it breaks, which must FAIL.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from conformance.cli import main

from .remote_mutants import MUTANTS

MUTANT_CLI = Path(__file__).with_name("remote_mutants.py")
KILLS = {
    "outbox_reads_inbox": ["AML-REM-1"],
    "accept_no_materialize": ["AML-REM-2"],
    "actor_override_ignored": ["AML-REM-3"],
    "no_recovery": ["AML-REM-4"],
    "no_send_outbox": ["AML-REM-5"],
}


def test_every_remote_requirement_has_a_mutant_that_kills_it() -> None:
    from conformance.installed import load_profile

    registry = load_profile("aidememo-local").registry()
    remote = sorted(r for r in registry.requirements if r.startswith("AML-REM-"))
    assert sorted(r for kills in KILLS.values() for r in kills) == remote
    assert sorted(KILLS) == sorted(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(KILLS))
def test_a_broken_remote_cli_fails_by_the_requirement_it_breaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 mutant: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # main sets it; restored afterwards
    cli = shlex.join([sys.executable, str(MUTANT_CLI), mutant])
    selected = [flag for requirement in KILLS[mutant] for flag in ("--requirement", requirement)]
    # The remote capability is claimed, not probed: the clean run shows the probe works.
    code = main(["run", "--profile", "aidememo-local", "--seed", "7", "--cli", cli, "--capability", "remote",
                 *selected])
    results = json.loads((tmp_path / "aidememo-report" / "results.json").read_text())
    verdicts = {r["requirement"]: r["verdict"] for r in results["records"]}
    assert verdicts == {requirement: "FAIL" for requirement in KILLS[mutant]}, verdicts
    assert code == 1
