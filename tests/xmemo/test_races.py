"""XMemo concurrency in the simulator: captures and recalls racing; one memory per key; bounds hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulations.linearizability.history import Operation
from simulations.xmemo.model import violations
from simulations.xmemo.races import export_failure, reproduce, run_campaign, shrink

from . import races

RACES = str(Path(races.__file__).resolve())


def op(i: int, input: dict[str, object], output: dict[str, object] | None) -> Operation:
    return Operation(client=i % 3, input=input, output=output, call_ns=i * 10,
                     return_ns=None if output is None else i * 10 + 5)


def capture(key: str | None, route: str = "remember") -> dict[str, object]:
    return {"op": "capture", "actor": "claude", "route": route, "key": key}


@pytest.mark.parametrize(("history", "kinds"), [
    ([op(0, capture("k"), {"http": 200, "id": "a"}), op(1, capture("k"), {"http": 200, "id": "a"}),
      op(2, {"op": "census", "key": "k"}, {"http": 200, "count": 1})], []),
    ([op(0, capture("k"), {"http": 200, "id": "a"}), op(1, capture("k"), {"http": 200, "id": "b"})], ["idempotency"]),
    ([op(0, capture("k"), {"http": 200, "id": "a"}), op(1, capture("k"), None),
      op(2, {"op": "census", "key": "k"}, {"http": 200, "count": 2})], ["idempotency"]),
    ([op(0, capture("k"), None), op(1, {"op": "census", "key": "k"}, {"http": 200, "count": 1})], []),
    ([op(0, capture(None, "timeline_event"), {"http": 200, "id": "a"}),
      op(1, capture(None, "timeline_event"), {"http": 200, "id": "a"})], ["append"]),
    ([op(0, {"op": "recall", "max_items": 2, "max_tokens": 10}, {"http": 200, "items": 3, "tokens": 1})], ["bounds"]),
    ([op(0, {"op": "recall", "max_items": 2, "max_tokens": 10}, {"http": 200, "items": 2, "tokens": 11})], ["bounds"]),
    ([op(0, {"op": "recall", "max_items": 2, "max_tokens": 10}, {"http": 422})], []),
])
def test_checks_on_small_histories_with_known_verdicts(history: list[Operation], kinds: list[str]) -> None:
    assert [f.kind for f in violations(history)] == kinds


def test_the_reference_holds_and_a_seed_replays_the_same_run() -> None:
    first = run_campaign(seed=11, max_batches=12)
    assert first.findings == () and len(first.history) > 30
    captures = [o for o in first.history if o.input["op"] == "capture" and o.input.get("key")]
    assert any(o.output and o.output.get("replayed") for o in captures)  # replays really raced originals
    again = run_campaign(seed=11, max_batches=12)
    assert again.decisions == first.decisions
    assert [o.output for o in again.history] == [o.output for o in first.history]


def test_a_check_then_act_idempotency_store_is_caught_shrunk_and_replayed(tmp_path: Path) -> None:
    found = None
    for seed in range(1, 30):
        run = run_campaign(seed=seed, max_batches=6, factory=races.check_then_act)
        if run.finding is not None:
            found = run
            break
    assert found is not None and found.finding is not None, "the planted race was never hit"
    assert found.finding.requirement == "XM-IDEM-1"
    small = shrink(found, races.check_then_act, budget_s=20)
    assert small.finding is not None and small.plan.operations <= 4 < found.plan.operations
    paths = export_failure(small, tmp_path, factory=f"{RACES}:check_then_act")
    doc = json.loads(paths["replay file"].read_text())
    assert doc["finding"]["requirement"] == "XM-IDEM-1" and doc["seed"] == found.seed
    assert "different memory ids" in paths["timeline"].read_text() or "memories (census" in paths["timeline"].read_text()
    assert reproduce(paths["replay file"], times=2) == 2
    clean = dict(doc, target={"kind": "embedded", "factory": None})
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps(clean))
    assert reproduce(fixed) == 0  # the same plan and schedule against the correct store


def test_a_recall_over_max_items_is_caught() -> None:
    run = run_campaign(seed=5, max_batches=10, factory=races.unbounded_items)
    assert run.finding is not None and run.finding.requirement == "XM-RECALL-1", run.findings
