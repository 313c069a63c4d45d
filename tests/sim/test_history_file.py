"""A campaign with a history file forgets what it has checked and reads it back from the file to
explain and shrink a race: the same finding as a campaign that keeps everything in memory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulations.campaign import read_back, run_campaign
from simulations.ledger import LEDGER
from simulations.replay import export_failure, load_replay, reproduce
from simulations.shrink import shrink

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mutants  # noqa: E402


@pytest.mark.parametrize(("name", "rule"), [("stale_cache", "linearizability"), ("late_stamp", "revision order")])
def test_a_race_found_from_the_history_file_is_the_one_found_in_memory(name: str, rule: str, tmp_path: Path) -> None:
    factory = getattr(mutants, name)
    path = tmp_path / "run.jsonl"
    on_disk = run_campaign(seed=0, budget_s=20.0, factory=factory, history_file=path)
    assert on_disk.finding is not None and on_disk.finding.kind == rule
    # Every operation the explanation names is, word for word, the one the file holds.
    named = re.findall(r"#(\d+) \(client (\d+)\): (.*)", on_disk.finding.explanation)
    assert named
    stored = read_back(path)
    for index, client, text in named:
        op = stored[int(index)]
        assert (op.client, LEDGER.describe_operation(op.input, op.output)) == (int(client), text)
    in_memory = run_campaign(seed=0, budget_s=20.0, factory=factory)
    assert in_memory.finding is not None
    assert (in_memory.verdict, in_memory.finding.kind, in_memory.finding.witness) == (
        on_disk.verdict, on_disk.finding.kind, on_disk.finding.witness)
    small = shrink(on_disk, factory, budget_s=30.0)
    assert small.finding is not None and small.finding.kind == rule
    assert shrink(in_memory, factory, budget_s=30.0).plan == small.plan
    paths = export_failure(small, tmp_path / "out", target="embedded", factory=f"{HERE / 'mutants.py'}:{name}")
    doc = load_replay(paths["replay file"], ledger=f"{HERE / 'mutants.py'}:{name}")  # named, as on the command line
    outcomes = [reproduce(doc) for _ in range(20)]
    assert sum(r.finding is not None for r in outcomes) == 20
    # The command a user is told to run, twice: the same answer both times.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = ["aidememo-sim", "replay", str(paths["replay file"]), "--ledger", f"{HERE / 'mutants.py'}:{name}"]
    runs = [subprocess.run(command, env=env, capture_output=True, text=True, timeout=120) for _ in (1, 2)]
    assert [r.returncode for r in runs] == [1, 1], runs[0].stdout + runs[0].stderr
