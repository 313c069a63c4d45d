"""The kit's remote client under the simulator: clean on the reference (in-process and by URL),
and a client whose retry refreshes its request is caught by the same judges."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulations.clients import run_client_campaign
from simulations.targets import EmbeddedTarget, HttpTarget

from .client_mutants import RefreshingRetryClient

ACTORS = ("agent-a", "agent-b", "agent-c")


@pytest.mark.parametrize("seed", [1, 3])
def test_the_clients_recovery_is_clean_on_the_embedded_reference(seed: int) -> None:
    target = EmbeddedTarget(ACTORS, seed=seed)
    try:
        run = run_client_campaign(target, seed=seed, run_id="r", rounds=2, workers=3, loss=0.3)
    finally:
        target.close()
    assert run.clean, (run.finding, run.client_findings)
    assert run.dropped > 0, "no answer was lost: the recovery path never ran"
    assert sum(op.input.get("op") == "handoff.accept" for op in run.history) >= 2 * 3


def test_the_clients_recovery_is_clean_against_a_server_by_url(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    target = HttpTarget(url, "p", tokens)
    try:
        run = run_client_campaign(target, seed=3, run_id="url3", rounds=2, workers=3, loss=0.3)
    finally:
        target.close()
    assert run.clean, (run.finding, run.client_findings)
    assert run.dropped > 0 and len(run.history) > 10


def test_a_refreshing_retry_is_found() -> None:
    # Under the seeded scheduler the run is the same every time (seeds 1-5 of 6 find it in 4 rounds).
    target = EmbeddedTarget(ACTORS, seed=1)
    try:
        run = run_client_campaign(target, seed=1, run_id="r", rounds=4, workers=3, loss=0.3,
                                  client_class=RefreshingRetryClient)
    finally:
        target.close()
    assert not run.clean, "a client that refreshes its retry went unnoticed (seed 1, 4 rounds)"
    assert any("handoff.accept" in problem and "committed 2 transitions" in problem
               for problem in run.client_findings), run.client_findings


def _sh(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_clients_command_prints_its_replay_and_judges(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from simulations.cli import main

    assert main(["clients", "--seed", "3", "--rounds", "1", "--clients", "2"]) == 0
    out = capsys.readouterr().out
    assert "1 handoffs x 2 clients of agent-b" in out
    printed = re.search(r"^replay this run with: (.*)$", out, re.MULTILINE)
    assert printed is not None and printed.group(1) == \
        "aidememo-sim clients --seed 3 --rounds 1 --clients 2 --loss 0.3 --budget 20"
    assert "answers lost" in out
    answers = [_sh(printed.group(1), tmp_path) for _ in (1, 2)]  # the printed command, twice
    assert [a.returncode for a in answers] == [0, 0], answers[0].stdout + answers[0].stderr
    counts = [re.sub(r" in [\d.]+ s$", "", a.stdout.strip().splitlines()[-1]) for a in answers]
    assert counts[0] == counts[1] == re.sub(r" in [\d.]+ s$", "", out.strip().splitlines()[-1])


def test_clients_workers_in_its_old_meaning_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``clients --workers K`` used to mean K racing clients; it now counts hunt shards, so alone
    it is refused rather than silently turned into a hunt."""
    from simulations.cli import main

    assert main(["clients", "--seed", "3", "--rounds", "1", "--workers", "3"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "--clients 3" in lines[0] and "hunt shards" in lines[0], captured.err


def test_clients_takes_the_hunts_workers_and_runs_shards_on_a_local_cluster(tmp_path: Path) -> None:
    hunt = _sh("aidememo-sim clients --seed 3 --rounds 1 --clients 2 --workers 2 --out found", tmp_path)
    assert hunt.returncode == 0, hunt.stdout + hunt.stderr
    assert "2 shards of 1 handoffs x 2 clients" in hunt.stdout
    assert re.search(r"^hunt: 2 of 2 shards run, 0 lost, [1-9]\d* operations, .* 0 distinct findings", hunt.stdout,
                     re.MULTILINE), hunt.stdout
    again = re.search(r"^replay this hunt with: (.*)$", hunt.stdout, re.MULTILINE)
    assert again is not None
    assert again.group(1) == "aidememo-sim clients --seed 3 --rounds 1 --clients 2 --loss 0.3 --budget 20 --workers 2"


def test_the_clients_command_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    from simulations.cli import main

    assert main(["clients", "--loss", "1.5"]) == 2
    assert "must be at least 0 and below 1" in capsys.readouterr().err
    assert main(["clients", "--token", "a=b"]) == 2
    assert "--token and --project need --url" in capsys.readouterr().err


PLANTED = f"{Path(__file__).with_name('client_mutants.py')}:RefreshingRetryClient"


def test_a_clients_hunt_reports_a_planted_client_once_and_its_printed_commands_agree_twice(tmp_path: Path) -> None:
    # Shards 1 and 2 of root seed 1 break the client's promise, one on returns only, the other on
    # accepts and returns: one bug, one finding.
    hunt = _sh(f"aidememo-sim clients --seed 1 --rounds 4 --clients 3 --client {PLANTED} --workers 3 --out found",
               tmp_path)
    assert hunt.returncode == 1, hunt.stdout[-3000:] + hunt.stderr[-2000:]
    summary = r"^hunt: 3 of 3 shards run, 0 lost, .* 1 distinct findings"
    assert re.search(summary, hunt.stdout, re.MULTILINE), hunt.stdout
    assert "finding 1: client, found by shards 1, 2 " in hunt.stdout
    assert len(list((tmp_path / "found").glob("clients-seed-*.jsonl"))) == 1
    alone = re.search(r"^  the shard alone: (.*)$", hunt.stdout, re.MULTILINE)
    again = re.search(r"^replay this hunt with: (.*)$", hunt.stdout, re.MULTILINE)
    assert alone is not None and again is not None and f"--client {PLANTED}" in alone.group(1)
    shard_runs = [_sh(alone.group(1), tmp_path) for _ in (1, 2)]
    problems = [[line for line in run.stdout.splitlines() if line.startswith("client: ")] for run in shard_runs]
    assert [run.returncode for run in shard_runs] == [1, 1] and problems[0] == problems[1] != []
    hunts = [_sh(again.group(1), tmp_path) for _ in (1, 2)]  # as printed: into the default folder
    for run in hunts:
        assert run.returncode == 1 and "1 distinct findings" in run.stdout and "found by shards 1, 2 " in run.stdout


def test_a_client_class_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    answer = _sh("aidememo-sim clients --seed 1 --rounds 1 --client nowhere.py:Client", tmp_path)
    assert answer.returncode == 2 and "Traceback" not in answer.stderr
    assert answer.stderr.strip() == "aidememo-sim: cannot load client class file nowhere.py", answer.stderr
