"""Hunt shards and their findings (issue 22): a shard writes its history to its own file and is
explained from it; findings of one bug from two shards share a key, and two bugs do not."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from simulations.campaign import RunResult, read_back, run_campaign
from simulations.findings import finding_key, shape
from simulations.linearizability.checker import Verdict
from simulations.linearizability.history import Operation
from simulations.shards import ShardSpec, history_path, run_shard

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
MUTANTS = HERE / "mutants.py"


def _spec(name: str, index: int, out: Path | None, batches: int = 300, root: int = 5) -> ShardSpec:
    return ShardSpec(root_seed=root, index=index, actors=3, budget_s=60, max_batches=batches,
                     factory=f"{MUTANTS}:{name}", out=None if out is None else str(out))


def test_a_shard_writes_its_history_to_its_own_file_and_is_explained_from_it(tmp_path: Path) -> None:
    outcome = run_shard(_spec("split_decide", 1, tmp_path))
    assert outcome.history == str(tmp_path / f"run-seed-{outcome.seed}.jsonl")  # the file `run --seed` writes
    stored = read_back(Path(outcome.history))
    assert len(stored) == outcome.operations > 0
    assert outcome.found is not None and outcome.found.finding is not None
    # The shrunk case is small; the campaign's own explanation named operations of the file.
    assert len(outcome.found.history) < len(stored)


def test_a_clean_shard_counts_the_operations_its_file_holds(tmp_path: Path) -> None:
    spec = ShardSpec(root_seed=7, index=0, actors=3, budget_s=60, max_batches=20, factory=None, out=str(tmp_path))
    outcome = run_shard(spec)
    assert outcome.found is None and outcome.verdict is Verdict.OK
    assert outcome.operations == len(read_back(tmp_path / f"run-seed-{spec.seed}.jsonl")) > 0


def test_an_aidememo_shard_runs_the_segments_its_replay_command_names(tmp_path: Path) -> None:
    # A hunt's shard command carries `--segment N`: the shard must run N-batch segments, as that command does.
    spec = ShardSpec(root_seed=7, index=0, actors=3, budget_s=60, max_batches=7, factory=None, out=str(tmp_path),
                     segment=3)
    run_shard(spec)
    alone = tmp_path / "alone.jsonl"
    run_campaign(seed=spec.seed, actors=3, budget_s=60, max_batches=7, history_file=alone, segment_batches=3)
    assert [op.input for op in read_back(tmp_path / f"run-seed-{spec.seed}.jsonl")] == \
        [op.input for op in read_back(alone)]


def test_a_worker_that_cannot_write_the_output_folder_uses_its_temporary_folder(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    path = history_path(_spec("split_decide", 0, blocked / "out"))
    assert path is not None and blocked not in path.parents and path.name.startswith("run-seed-")


def _renamed(result: RunResult, suffix: str) -> RunResult:
    """The same case with every id and the project renamed, the operations in reverse order and
    the blamed one repeated: what another shard's shrinking of the same bug may give."""

    def rename(value: object) -> object:
        if isinstance(value, str):
            return re.sub(r"(handoff|claim|cmd|fact|session)-([\w-]+)", rf"\1-\2{suffix}", value).replace(
                "project-sim", f"project-other{suffix}")
        if isinstance(value, dict):
            return {k: rename(v) for k, v in value.items()}
        return value

    ops = [Operation(client=op.client + 1, input=rename(op.input), output=rename(op.output),  # type: ignore[arg-type]
                     call_ns=op.call_ns, return_ns=op.return_ns) for op in reversed(result.history)]
    last = len(ops) - 1
    assert result.finding is not None
    moved = tuple(last - i for i in result.finding.witness)
    expected = tuple((last - i, answers) for i, answers in result.finding.expected)
    return replace(result, history=tuple([*ops, ops[moved[0]]]),
                   finding=replace(result.finding, witness=(*moved, len(ops)), expected=expected))


def test_a_findings_shape_leaves_out_ids_projects_order_and_repeats() -> None:
    found = run_shard(_spec("split_decide", 1, None)).found
    assert isinstance(found, RunResult)
    assert finding_key(_renamed(found, "-x9")) == finding_key(found)
    words = " ".join(shape(found))
    assert words and not re.search(r"handoff-|claim-|project|rev \d|\d{4,}", words), words


@pytest.mark.parametrize(("one", "other"), [("double_accept", "blind_heartbeat")])
def test_two_bugs_that_break_the_same_model_stay_two_findings(one: str, other: str) -> None:
    keys = []
    for name in (one, other):
        found = next(o.found for o in (run_shard(_spec(name, i, None, root=0)) for i in range(6)) if o.found)
        assert isinstance(found, RunResult) and found.finding is not None
        keys.append(finding_key(found))
    assert keys[0][0] == keys[1][0] == "linearizability"
    assert keys[0] != keys[1], keys


def test_one_mutant_found_by_two_shards_is_one_finding() -> None:
    # Shards 0, 1 and 3 of root 5 shrink to two racing returns (shard 2: two racing sends, another finding).
    keys = [finding_key(o.found) for o in (run_shard(_spec("split_decide", i, None)) for i in (0, 1, 3)) if o.found]
    assert len(keys) == 3 and len(set(keys)) == 1, keys
