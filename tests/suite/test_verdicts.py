"""The verdict rule: every (outcome, phase, level, baseline) against a literal table, and the
README's and docs/conformance.md's lists of verdicts and of those that fail the run against the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.errors import Indeterminate, NotScored, ShapeError, TargetError, Untestable
from conformance.registry import Level
from conformance.verdicts import Phase, Verdict, decide, replaces

ROOT = Path(__file__).resolve().parents[2]

# outcome -> (exception, skipped, warned)
OUTCOMES: dict[str, tuple[BaseException | None, bool, bool]] = {
    "passed": (None, False, False),
    "passed, warned": (None, False, True),
    "skipped": (None, True, False),
    "NotScored": (NotScored("x"), False, False),
    "Indeterminate": (Indeterminate("x"), False, False),
    "Untestable": (Untestable("x"), False, False),
    "AssertionError": (AssertionError("x"), False, False),
    "TargetError": (TargetError("x"), False, False),
    "ShapeError": (ShapeError("x"), False, False),
    "KeyError": (KeyError("x"), False, False),
}
LEVELS = (Level.MUST, Level.SHOULD, Level.MAY)
# (outcome, phase) -> verdicts for MUST SHOULD MAY, then the same with a baseline entry expecting a failure.
# Written down from the rule as it stood in recording.py and verdicts.py before they became one function.
TABLE = {
    ("passed", "setup"): "PASS PASS PASS XPASS XPASS XPASS",
    ("passed", "call"): "PASS PASS PASS XPASS XPASS XPASS",
    ("passed", "teardown"): "PASS PASS PASS XPASS XPASS XPASS",
    ("passed, warned", "setup"): "WARN WARN WARN WARN WARN WARN",
    ("passed, warned", "call"): "WARN WARN WARN WARN WARN WARN",
    ("passed, warned", "teardown"): "WARN WARN WARN WARN WARN WARN",
    ("skipped", "setup"): "SKIP SKIP SKIP SKIP SKIP SKIP",
    ("skipped", "call"): "SKIP SKIP SKIP SKIP SKIP SKIP",
    ("skipped", "teardown"): "SKIP SKIP SKIP SKIP SKIP SKIP",
    ("NotScored", "setup"): "SKIP SKIP SKIP SKIP SKIP SKIP",
    ("NotScored", "call"): "SKIP SKIP SKIP SKIP SKIP SKIP",
    ("NotScored", "teardown"): "SKIP SKIP SKIP SKIP SKIP SKIP",
    ("Indeterminate", "setup"): "UNKNOWN UNKNOWN UNKNOWN UNKNOWN UNKNOWN UNKNOWN",
    ("Indeterminate", "call"): "UNKNOWN UNKNOWN UNKNOWN UNKNOWN UNKNOWN UNKNOWN",
    ("Indeterminate", "teardown"): "UNKNOWN UNKNOWN UNKNOWN UNKNOWN UNKNOWN UNKNOWN",
    ("Untestable", "setup"): "UNTESTABLE UNTESTABLE UNTESTABLE XFAIL XFAIL XFAIL",
    ("Untestable", "call"): "UNTESTABLE UNTESTABLE UNTESTABLE XFAIL XFAIL XFAIL",
    ("Untestable", "teardown"): "UNTESTABLE UNTESTABLE UNTESTABLE XFAIL XFAIL XFAIL",
    ("AssertionError", "setup"): "UNTESTABLE WARN INFO XFAIL WARN INFO",
    ("AssertionError", "call"): "FAIL WARN INFO XFAIL WARN INFO",
    ("AssertionError", "teardown"): "FAIL WARN INFO XFAIL WARN INFO",
    ("TargetError", "setup"): "UNTESTABLE WARN INFO XFAIL WARN INFO",
    ("TargetError", "call"): "FAIL WARN INFO XFAIL WARN INFO",
    ("TargetError", "teardown"): "FAIL WARN INFO XFAIL WARN INFO",
    ("ShapeError", "setup"): "UNTESTABLE WARN INFO XFAIL WARN INFO",
    ("ShapeError", "call"): "FAIL WARN INFO XFAIL WARN INFO",
    ("ShapeError", "teardown"): "FAIL WARN INFO XFAIL WARN INFO",
    ("KeyError", "setup"): "ERROR ERROR ERROR ERROR ERROR ERROR",
    ("KeyError", "call"): "ERROR ERROR ERROR ERROR ERROR ERROR",
    ("KeyError", "teardown"): "ERROR ERROR ERROR ERROR ERROR ERROR",
    **{(outcome, "unrun"): " ".join(["UNTESTABLE"] * 6) for outcome in OUTCOMES},
}


@pytest.mark.parametrize(("outcome", "phase"), sorted(TABLE))
def test_every_outcome_phase_level_and_baseline_has_the_tables_verdict(outcome: str, phase: Phase) -> None:
    exception, skipped, warned = OUTCOMES[outcome]
    got = [decide(exception=exception, skipped=skipped, warned=warned, level=level, expected_failure=expected,
                  phase=phase).value for expected in (False, True) for level in LEVELS]
    assert " ".join(got) == TABLE[outcome, phase]


def test_the_table_covers_every_outcome_and_phase() -> None:
    assert set(TABLE) == {(outcome, phase) for outcome in OUTCOMES for phase in ("setup", "call", "teardown", "unrun")}


@pytest.mark.parametrize("first", [None, *Verdict])
@pytest.mark.parametrize("later", list(Verdict))
def test_a_later_phase_replaces_only_a_pass(first: Verdict | None, later: Verdict) -> None:
    assert replaces(later, first) is (first is None or (first is Verdict.PASS and later is not Verdict.PASS))


def _verdicts_in(text: str) -> set[Verdict]:
    return {Verdict(word) for word in re.findall(r"\b[A-Z]{4,10}\b", text) if word in Verdict.__members__}


FAILING = {verdict for verdict in Verdict if not verdict.ok}


def test_the_readme_lists_every_verdict_and_those_that_fail_the_run() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    bullet = text.split("- **Verdicts.**", 1)[1].split("\n- ", 1)[0].split("\n\n", 1)[0]
    listed, exits = bullet.split("Exit code 0 only when", 1)
    assert _verdicts_in(listed) == set(Verdict)
    assert _verdicts_in(exits.split(";", 1)[0]) == FAILING


def test_the_conformance_doc_table_and_exit_codes_are_the_codes() -> None:
    text = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = text.split("## Verdicts and the exit code", 1)[1].split("\n## ", 1)[0]
    rows = {Verdict(cells[1]): cells[3] for line in section.splitlines()
            if len(cells := [c.strip() for c in line.split("|")]) == 5 and cells[1] in Verdict.__members__}
    assert set(rows) == set(Verdict)
    assert {verdict for verdict, fails in rows.items() if fails == "yes"} == FAILING
    assert all(fails in ("yes", "no") for fails in rows.values())
    sentence = section.split("exits 0 only when", 1)[1].split("1 when", 1)[0]
    assert _verdicts_in(sentence) == FAILING
