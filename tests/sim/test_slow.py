"""Longer campaigns, deselected by default (run with ``-m slow``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aidememo_ref import SystemClock, serve_in_thread
from simulations.campaign import run_campaign
from simulations.plan import READER
from simulations.targets import HttpTarget

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutants  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", range(100, 130))
def test_reference_campaigns_show_no_violation(seed: int) -> None:
    result = run_campaign(seed=seed, actors=3 + seed % 2, max_batches=80, budget_s=120)
    assert result.finding is None, result.finding.explanation


@pytest.mark.parametrize("seed", range(3))
def test_real_concurrency_over_a_socket_finds_the_split_decision(seed: int, tmp_path: Path) -> None:
    """No scheduler here: uvicorn's threads and the network interleave the requests."""
    ledger = mutants.split_decide(tmp_path / "ledger.sqlite", clock=SystemClock(), scheduler=None)
    tokens = {}
    for actor in ("agent-a", "agent-b", "agent-c", READER):
        tokens[actor] = f"tok-{actor}-0123456789"
        ledger.provision(tenant_id="t", project_id="p", actor_id=actor, token=tokens[actor],
                         role="reader" if actor == READER else "writer")
    with serve_in_thread(ledger) as url:
        result = run_campaign(seed=seed, budget_s=60, target=HttpTarget(url, "p", tokens))
    ledger.close()
    assert result.finding is not None
