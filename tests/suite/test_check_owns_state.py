"""A check owns the state its verdict depends on (issue 35): a mailbox or visibility check that
looks for others' handoffs creates them, so a check failing in a whole run fails alone too.

The planted bug (``mutants.inbox_lists_others``) lets an inbox list the handoffs others sent to
other receivers. In a whole run the shared project holds other checks' handoffs, and before the
mailbox checks made their own bystanders, four of the five that failed there passed when rerun
alone: their printed rerun cleared a still-buggy server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SEED = "3535"
MUTANT = "inbox_lists_others"
SELECTION = ["--requirement", "AM-MBOX-", "--requirement", "AM-VIS-"]
# The checks that read a mailbox listing and so must see the leak; each must fail alone.
LISTING_CHECKS = (
    "test_mailbox.py::test_inbox_and_outbox_are_relative_to_the_token",
    "test_mailbox.py::test_pages_follow_next_before_seq",
    "test_mailbox.py::test_completed_handoffs_hide_from_the_inbox_only",
    "test_mailbox.py::test_a_transition_moves_the_handoff_to_the_top",
    "test_mailbox.py::test_source_filter_is_exact",
    "test_visibility.py::test_non_participant_mailboxes_omit_the_handoff",
)


def _records(report_dir: Path, args: list[str], factory: str | None = MUTANT) -> list[dict]:
    command = [sys.executable, "-m", "conformance.cli", "run", "--seed", SEED, "--report-dir", str(report_dir),
               *(["--embedded-factory", f"mutants:{factory}"] if factory else []), *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    results = report_dir / "results.json"
    assert results.exists(), f"no results.json (exit {done.returncode})\n{done.stderr[-2000:]}"
    return json.loads(results.read_text())["records"]


def _verdicts(records: list[dict]) -> dict[str, str]:
    return {r["nodeid"]: r["verdict"] for r in records}


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _verdicts(_records(tmp_path_factory.mktemp("whole"), SELECTION))


def test_the_whole_run_fails_every_listing_check(whole_run: dict[str, str]) -> None:
    assert {check: whole_run.get(check) for check in LISTING_CHECKS} == dict.fromkeys(LISTING_CHECKS, "FAIL")


@pytest.mark.parametrize("check", LISTING_CHECKS)
def test_a_listing_check_fails_alone(tmp_path: Path, check: str) -> None:
    # Alone: a fresh embedded target holding only what this one check creates.
    assert _verdicts(_records(tmp_path / "mutant", [check])) == {check: "FAIL"}
    assert _verdicts(_records(tmp_path / "reference", [check], factory=None)) == {check: "PASS"}


def test_every_check_failing_in_the_whole_run_fails_alone(tmp_path: Path, whole_run: dict[str, str]) -> None:
    failing = sorted(check for check, verdict in whole_run.items() if verdict == "FAIL")
    alone = {check: _verdicts(_records(tmp_path / str(n), [check])).get(check) for n, check in enumerate(failing)}
    assert alone == dict.fromkeys(failing, "FAIL")
