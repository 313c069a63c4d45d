"""Longer campaigns, deselected by default (run with ``-m slow``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aidememo_ref import SystemClock
from simulations.campaign import run_campaign
from simulations.targets import HttpTarget

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutants  # noqa: E402
from .served import served  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", range(100, 130))
def test_reference_campaigns_show_no_violation(seed: int) -> None:
    result = run_campaign(seed=seed, actors=3 + seed % 2, max_batches=80, budget_s=120)
    assert result.finding is None, result.finding.explanation


@pytest.mark.parametrize("seed", range(3))
def test_real_concurrency_over_a_socket_finds_the_split_decision(seed: int, tmp_path: Path) -> None:
    """No scheduler here: uvicorn's threads and the network interleave the requests."""
    ledger = mutants.split_decide(tmp_path / "ledger.sqlite", clock=SystemClock(), scheduler=None)
    with served(ledger) as (url, tokens):
        result = run_campaign(seed=seed, budget_s=60, target=HttpTarget(url, "p", tokens))
    assert result.finding is not None
    # Two decisions from one revision: answers no order explains, not a receipt or feed rule.
    assert result.finding.kind == "linearizability", result.finding.explanation
