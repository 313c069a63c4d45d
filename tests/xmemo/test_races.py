"""XMemo concurrency in the simulator: captures and recalls racing; one memory per key; bounds hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulations.linearizability.history import Operation
from simulations.xmemo.model import violations
from simulations.xmemo.campaign import rerun, run_campaign
from simulations.xmemo.replay import export_failure, reproduce
from simulations.xmemo.shrink import shrink

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
    assert reproduce(paths["replay file"], times=2, factory=f"{RACES}:check_then_act") == 2
    clean = dict(doc, target={"kind": "embedded", "factory": None})
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps(clean))
    assert reproduce(fixed) == 0  # the same plan and schedule against the correct store


def test_a_recall_over_max_items_is_caught() -> None:
    run = run_campaign(seed=5, max_batches=10, factory=races.unbounded_items)
    assert run.finding is not None and run.finding.requirement == "XM-RECALL-1", run.findings


# -- segments: a long campaign holds one segment's history ----------------------------------------


def test_a_run_shorter_than_a_segment_is_the_run_it_always_was() -> None:
    whole = run_campaign(seed=11, max_batches=12, segment_batches=0)
    rotating = run_campaign(seed=11, max_batches=12)  # the default segment is far longer
    assert rotating.segment == 0 and rotating.seed == 11 and rotating.earlier == (0, 0)
    assert rotating.decisions == whole.decisions
    assert [o.output for o in rotating.history] == [o.output for o in whole.history]


def test_a_long_campaign_keeps_one_segment_and_counts_them_all() -> None:
    run = run_campaign(seed=11, max_batches=40, segment_batches=5)
    assert run.finding is None and run.segment == 7  # eight segments of five batches
    assert run.batches == 40 + 8  # each segment closed by its census
    assert len(run.plan.batches) == 6 and run.operations > 4 * len(run.history)


def test_a_race_found_in_a_later_segment_replays_alone_from_its_segment_seed(tmp_path: Path) -> None:
    from simulations.plan import segment_seed

    found = None
    for seed in range(1, 40):
        run = run_campaign(seed=seed, max_batches=30, segment_batches=3, factory=races.check_then_act)
        if run.finding is not None and run.segment >= 1:
            found, root = run, seed
            break
    assert found is not None and found.finding is not None, "the planted race was never hit after segment 0"
    assert found.seed == segment_seed(root, found.segment) and found.earlier[0] == 4 * found.segment
    for _ in range(20):  # the segment alone, on a fresh reference under its seed and schedule
        again = rerun(found.plan, found.seed, races.check_then_act, found.decisions)
        assert [f.kind for f in again.findings] == [f.kind for f in found.findings]
    bin_dir = Path(sys.executable).parent
    command = [str(bin_dir / "aidememo-sim"), "xmemo", "run", "--seed", str(root), "--batches", "30", "--segment", "3",
               "--ledger", f"{RACES}:check_then_act", "--out", "out"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    assert f"found in segment {found.segment} (from batch {found.earlier[0] + 1})" in done.stdout
    printed = [line.removeprefix("reproduce with: ") for line in done.stdout.splitlines()
               if line.startswith("reproduce with: ")]
    assert len(printed) == 1
    for _ in (1, 2):  # the printed replay, twice
        replay = subprocess.run(printed[0].split(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
                                env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
        assert replay.returncode == 1 and "reproduced 1/1" in replay.stdout, replay.stdout[-2000:] + replay.stderr
