"""Planted race bugs are found within the default budget, shrunk, and replay 20 times out of 20.

Each mutant in ``mutants.py`` answers every request like the reference when requests come one at
a time; the tests below show both halves of that: the simulator finds each race, and the same
operations run one by one show nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simulations.campaign import rerun, run_campaign
from simulations.plan import Batch, Plan
from simulations.replay import export_failure, load_replay, reproduce
from simulations.shrink import shrink

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mutants  # noqa: E402

DEFAULT_BUDGET_S = 20.0  # aidememo-sim run's default --budget
SEED = 0


@pytest.fixture(scope="module", params=sorted(mutants.MUTANTS))
def found(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    name = request.param
    factory = getattr(mutants, name)
    result = run_campaign(seed=SEED, budget_s=DEFAULT_BUDGET_S, factory=factory)
    assert result.finding is not None, f"{name}: no violation within {DEFAULT_BUDGET_S} s (seed {SEED})"
    small = shrink(result, factory, budget_s=30.0)
    out = tmp_path_factory.mktemp(name)
    paths = export_failure(small, out, target="embedded", factory=f"{HERE / 'mutants.py'}:{name}")
    return name, factory, result, small, paths


def test_the_simulator_finds_the_planted_race(found) -> None:
    name, _, result, small, _ = found
    assert result.finding is not None and result.finding.witness
    assert small.finding is not None
    assert small.plan.operations <= result.plan.operations
    assert 2 <= len(small.plan.actors) <= len(result.plan.actors)


def test_the_replay_file_reproduces_it_20_times_out_of_20(found) -> None:
    *_, paths = found
    doc = load_replay(paths["replay file"])
    outcomes = [reproduce(doc) for _ in range(20)]
    assert sum(r.finding is not None for r in outcomes) == 20
    # Not only a violation each time: the very same answers each time.
    first = [op.output for op in outcomes[0].history]
    assert all([op.output for op in r.history] == first for r in outcomes)


def test_the_same_operations_one_at_a_time_show_nothing(found) -> None:
    _, factory, _, small, _ = found
    sequential = Plan(
        actors=small.plan.actors,
        workers=small.plan.workers,
        batches=tuple(Batch(clock_ms=b.clock_ms, ops=(op,)) for b in small.plan.batches for op in b.ops),
    )
    assert rerun(sequential, small.seed, factory).finding is None


def test_the_reference_passes_the_same_campaign(found) -> None:
    _, _, result, _, _ = found
    assert rerun(result.plan, result.seed).finding is None


def test_the_exported_pytest_file_fails_while_the_race_is_present(found) -> None:
    *_, paths = found
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(paths["pytest file"])],
        capture_output=True, text=True, timeout=120, cwd=HERE.parent.parent,
    )
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed" in proc.stdout


def test_exports_are_self_contained(found) -> None:
    *_, paths = found
    html = paths["timeline"].read_text()
    assert "<svg" in html and 'class="bad"' in html and "<script src" not in html
    script = paths["curl script"].read_text()
    assert script.startswith("#!/bin/sh") and "curl -sS" in script and "token-" not in script


def test_reference_campaigns_are_clean_and_deterministic() -> None:
    first = run_campaign(seed=7, max_batches=25, budget_s=60)
    assert first.finding is None
    again = rerun(first.plan, first.seed, schedule=first.decisions)
    assert [op.output for op in again.history] == [op.output for op in first.history]
    assert again.decisions == first.decisions
