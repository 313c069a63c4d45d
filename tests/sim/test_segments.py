"""A campaign with a history file moves to a fresh embedded reference every ``segment_batches``
batches: each segment is checked on its own, with its own seed and run id, one history file
holds them all, and a race found in a later segment is explained, shrunk and replayed from that
segment alone, as if it were the first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulations.campaign import read_back, run_campaign, segment_run_id, segment_seed
from simulations.cli import main
from simulations.ledger import LEDGER
from simulations.linearizability.checker import Verdict
from simulations.replay import export_failure, load_replay, reproduce
from simulations.shrink import shrink

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mutants  # noqa: E402


def test_a_run_shorter_than_a_segment_is_the_run_it_always_was(tmp_path: Path) -> None:
    rotating = run_campaign(seed=3, max_batches=40, budget_s=120, history_file=tmp_path / "a.jsonl",
                            segment_batches=40)
    whole = run_campaign(seed=3, max_batches=40, budget_s=120, history_file=tmp_path / "b.jsonl", segment_batches=0)
    assert (rotating.segment, rotating.earlier, rotating.plan) == (0, (0, 0), whole.plan)
    assert rotating.plan.run_id == segment_run_id(0) == "r" and rotating.seed == segment_seed(3, 0) == 3

    def answers(path: Path) -> list[tuple[object, ...]]:
        return [(op.client, dict(op.input), op.output) for op in read_back(path)]
    assert answers(tmp_path / "a.jsonl") == answers(tmp_path / "b.jsonl")


def test_segments_of_a_correct_reference_are_each_checked_and_the_file_checks_ok(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    result = run_campaign(seed=5, max_batches=35, budget_s=120, history_file=path, segment_batches=10)
    assert result.verdict is Verdict.OK and result.finding is None
    # Four segments: 10 + 10 + 10 + 5 batches; the result is the last one's, counting the rest.
    assert (result.segment, result.earlier[0], len(result.plan.batches), result.batches) == (3, 30, 5, 35)
    ops = read_back(path)
    assert result.operations == len(ops) and result.earlier[1] < len(ops)
    # Each segment's ids carry its own run id: the file is one history, a handoff one partition.
    run_ids = {re.sub(r"^handoff-(r\d*)-\d+$", r"\1", str(op.input["handoff_id"])) for op in ops}
    assert run_ids == {"r", "r1", "r2", "r3"}
    assert len({segment_seed(5, k) for k in range(4)}) == 4
    assert main(["check", str(path)]) == 0  # no segment's project_seq or ids accuse another's


@pytest.mark.parametrize(("name", "seed", "rule"), [("stale_cache", 0, "linearizability"),
                                                    ("late_stamp", 0, "revision order")])
def test_a_race_in_a_later_segment_is_explained_shrunk_and_replayed_from_that_segment(
        name: str, seed: int, rule: str, tmp_path: Path) -> None:
    factory = getattr(mutants, name)
    path = tmp_path / "run.jsonl"
    found = run_campaign(seed=seed, max_batches=200, budget_s=60, factory=factory, history_file=path,
                         segment_batches=8)
    assert found.finding is not None and found.finding.kind == rule
    assert found.segment >= 1 and found.seed == segment_seed(seed, found.segment)
    first = found.earlier[1]
    stored = read_back(path)
    assert found.history == tuple(stored[first:])  # the segment's operations, numbered from its start
    for index, client, text in re.findall(r"#(\d+) \(client (\d+)\): (.*)", found.finding.explanation):
        op = stored[first + int(index)]
        assert (op.client, LEDGER.describe_operation(op.input, op.output)) == (int(client), text)
    small = shrink(found, factory, budget_s=30.0)
    assert small.finding is not None and small.finding.kind == rule and small.plan.run_id == found.plan.run_id
    paths = export_failure(small, tmp_path / "out", target="embedded", factory=f"{HERE / 'mutants.py'}:{name}")
    doc = load_replay(paths["replay file"], ledger=f"{HERE / 'mutants.py'}:{name}")  # named, as on the command line
    assert sum(reproduce(doc).finding is not None for _ in range(20)) == 20


def test_the_command_says_which_segment_found_it_and_its_replay_reproduces(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def sh(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(words), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    run = sh("aidememo-sim", "run", "--seed", "0", "--batches", "200", "--segment", "8", "--ledger",
             f"{HERE / 'mutants.py'}:stale_cache", "--out", "found")
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"found in segment [1-9]\d* \(from batch \d+, operation #\d+ of the history file\), on a "
                     rf"fresh reference with segment seed {segment_seed(0, 3)}", run.stdout), run.stdout
    assert "--segment 8" in run.stdout.splitlines()[1]  # the printed rerun command keeps the segments
    printed = re.search(r"reproduce with: (aidememo-sim replay .+)", run.stdout)
    assert printed is not None, run.stdout
    replayed = sh(*printed.group(1).split())
    assert replayed.returncode == 1 and "reproduced 1/1" in replayed.stdout, replayed.stdout + replayed.stderr


def test_a_negative_segment_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--segment", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--segment: must not be negative: '-1'" in err and "Traceback" not in err
