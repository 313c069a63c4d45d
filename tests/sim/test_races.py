"""Planted race bugs are found within the default budget, by the check their race breaks, shrunk,
and replay 20 times out of 20.

Each mutant in ``mutants.py`` answers every request like the reference when requests come one
at a time; the tests show both halves of that: the simulator finds each race, and the same
operations run one by one show nothing. Each race is found by one check only, the others
passing on the very same run. The default run uses one seed; ``-m slow`` runs three.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulations.campaign import RunResult, rerun, run_campaign, violations_by_rule
from simulations.plan import Batch, Plan
from simulations.replay import export_failure, load_replay, reproduce
from simulations.shrink import shrink

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mutants  # noqa: E402

DEFAULT_BUDGET_S = 20.0  # aidememo-sim run's default --budget


def _found(name: str, seed: int) -> RunResult:
    result = run_campaign(seed=seed, budget_s=DEFAULT_BUDGET_S, factory=getattr(mutants, name))
    assert result.finding is not None, f"{name}: no violation within {DEFAULT_BUDGET_S} s (seed {seed})"
    return result


def _only_its_check(name: str, result: RunResult) -> None:
    """A race built for one property is caught by that check, and every other passes."""
    expected = mutants.CAUGHT_BY.get(name)
    if expected is None:
        return
    assert result.finding is not None
    assert result.finding.kind == expected, f"{name} was caught by {result.finding.kind}, not {expected}"
    counts = violations_by_rule(result.history, result.feed)
    assert {rule for rule, n in counts.items() if n} == {expected}, counts


@pytest.mark.parametrize("name", sorted(mutants.MUTANTS))
def test_each_planted_race_is_found_shrunk_and_replayed(name: str, tmp_path: Path) -> None:
    factory = getattr(mutants, name)
    result = _found(name, 0)
    _only_its_check(name, result)
    # The reference, on the very same plan and schedule, shows nothing.
    assert rerun(result.plan, result.seed, schedule=result.decisions).finding is None
    small = shrink(result, factory, budget_s=30.0)
    assert small.finding is not None
    assert small.plan.operations <= result.plan.operations
    assert 2 <= len(small.plan.actors) <= len(result.plan.actors)
    # The same operations one at a time show nothing: only the interleaving exposes it.
    sequential = Plan(actors=small.plan.actors, workers=small.plan.workers, batches=tuple(
        Batch(clock_ms=b.clock_ms, ops=(op,)) for b in small.plan.batches for op in b.ops))
    assert rerun(sequential, small.seed, factory).finding is None
    paths = export_failure(small, tmp_path, target="embedded", factory=f"{HERE / 'mutants.py'}:{name}")
    doc = load_replay(paths["replay file"], ledger=f"{HERE / 'mutants.py'}:{name}")  # named, as on the command line
    outcomes = [reproduce(doc) for _ in range(20)]
    assert sum(r.finding is not None for r in outcomes) == 20
    # Not only a violation each time: the very same answers each time.
    first = [op.output for op in outcomes[0].history]
    assert all([op.output for op in r.history] == first for r in outcomes)
    html = paths["timeline"].read_text()
    assert "<svg" in html and 'class="bad"' in html and "<script src" not in html
    # The page says what went wrong and how to see it again; the finding names its requirements.
    assert "was answered" in html or "<p class=\"summary\">" in html
    assert all(f"{word} " in html for word in ("aidememo-sim replay", "pytest", "sh", "aidememo-conformance reproduce"))
    assert doc["finding"]["requirements"] and all(r.startswith("AM-") for r in doc["finding"]["requirements"])
    script = paths["curl script"].read_text()
    assert script.startswith("#!/bin/sh") and "curl -sS" in script and not re.search(r"tok-[0-9a-f]{32}", script)
    assert "/v1/projects/project-sim/" not in script and "-r-" not in script  # fresh ids, its own project
    assert subprocess.run(["sh", "-n", str(paths["curl script"])], capture_output=True).returncode == 0


def _exported_test_fails(name: str, tmp_path: Path) -> None:
    small = shrink(_found(name, 0), getattr(mutants, name), budget_s=30.0)
    paths = export_failure(small, tmp_path, target="embedded", factory=f"{HERE / 'mutants.py'}:{name}")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:aidememo", str(paths["pytest file"])],
        capture_output=True, text=True, timeout=120, cwd=HERE.parent.parent,
    )
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed" in proc.stdout


def test_the_exported_pytest_file_fails_while_the_race_is_present(tmp_path: Path) -> None:
    _exported_test_fails("split_decide", tmp_path)  # the export is the same for every race


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(mutants.MUTANTS) - {"split_decide"}))
def test_every_exported_pytest_file_fails_while_its_race_is_present(name: str, tmp_path: Path) -> None:
    _exported_test_fails(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(mutants.MUTANTS))
def test_each_planted_race_is_found_on_three_seeds(name: str, seed: int) -> None:
    _only_its_check(name, _found(name, seed))


def test_reference_campaigns_are_clean_and_deterministic() -> None:
    first = run_campaign(seed=7, max_batches=25, budget_s=60)
    assert first.finding is None
    again = rerun(first.plan, first.seed, schedule=first.decisions)
    assert [op.output for op in again.history] == [op.output for op in first.history]
    assert again.decisions == first.decisions
