"""Faults under the remote client's races (``aidememo-sim clients --faults``): against the
reference served through ``[serve]`` nothing is found, twice the same; a server whose retried
accept makes a second transition is found only once answers are lost, and found again by the
same command; a later run that does not recover is a finding."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from simulations.cli import main
from simulations.faults.clients import _later_run
from tests.sim.test_faults import MUTANTS, REF, _target

ALL = "kill,pause,drop-answers,reset"


def _clients(tmp: Path, config: Path, seed: int, rounds: int, capsys: pytest.CaptureFixture[str],
             *extra: str) -> tuple[int, str, dict[str, Any] | None]:
    code = main(["clients", "--config", str(config), "--seed", str(seed), "--rounds", str(rounds), "--out", str(tmp),
                 *extra])
    out = capsys.readouterr().out
    report = tmp / f"clients-faults-seed-{seed}" / "faults.json"
    return code, out, json.loads(report.read_text()) if report.exists() else None


def test_the_clients_under_every_fault_kind_find_nothing_in_the_served_reference_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Seed 8 over the four kinds: answers dropped in rounds 3 and 7, kills in 4 and 8, a pause in
    # 5, resets in 6.
    config = _target(tmp_path / "served.toml", [REF])
    reports = []
    for attempt in ("a", "b"):
        code, out, report = _clients(tmp_path / attempt, config, 8, 9, capsys, "--faults", ALL)
        assert code == 0 and report is not None, out
        reports.append(report)
        summary = out.strip().splitlines()[-1]
        assert summary.startswith("2 kills, 1 pauses, ") and summary.endswith("verdict OK"), out
        assert "replay this run with: aidememo-sim clients --seed 8 --rounds 9 " in out and f"--faults {ALL}" in out
    first, second = reports
    assert [(f["batch"], f["kind"]) for f in first["schedule"]] == [
        (3, "drop-answers"), (4, "kill"), (5, "pause"), (6, "reset"), (7, "drop-answers"), (8, "kill")]
    same = ("schedule", "verdict", "findings")
    assert [first[k] for k in same] == [second[k] for k in same]
    assert first["findings"] == [] and len(first["recovery_s"]) == 2


def test_a_retried_accept_that_transitions_again_is_found_through_lost_answers_only_and_replayed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One client per handoff and no simulated loss: only the proxy's dropped answers make the
    # client resend an accept, which this server decides again instead of replaying its receipt.
    # The finding is shrunk to the one round whose dropped answer shows it, written as a replay
    # file, and replayed: shown again on this server, not on the reference.
    config = _target(tmp_path / "mutant.toml", [sys.executable, str(MUTANTS), "retry_second_transition"])
    quiet = ("--clients", "1", "--loss", "0")
    code, out, _ = _clients(tmp_path / "none", config, 9, 8, capsys, *quiet)
    assert code == 0, out
    code, out, report = _clients(tmp_path / "a", config, 9, 8, capsys, *quiet, "--faults", "drop-answers")
    assert code == 1 and report is not None, out
    assert "linearizability" in {f["rule"] for f in report["findings"]}, out
    assert "replay it, with its fault schedule: aidememo-sim clients --seed 9 " in out
    replay = tmp_path / "a" / "clients-faults-seed-9" / "replay.json"
    doc = json.loads(replay.read_text())
    assert (doc["command"], doc["clients"], doc["loss"], doc["client"]) == ("clients", 1, 0, None)
    assert doc["keep"] is not None and len(doc["keep"]) < len(report["schedule"]), (doc["keep"], report["schedule"])
    assert f"aidememo-sim replay {replay} --config {config} --times 5" in out
    for target, shown in ((config, 1), (_target(tmp_path / "reference.toml", [REF]), 0)):
        assert main(["replay", str(replay), "--config", str(target)]) == shown
        said = capsys.readouterr().out
        assert f"reproduced {shown}/1" in said and "the clients' races of seed 9" in said, said


def test_a_clients_finding_replays_only_with_the_client_class_it_names(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tests.targetfile import write_target

    evil, marker = tmp_path / "evil.py", tmp_path / "imported"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\nclass Broken: pass\n")
    case = {"format": "aidememo-sim-fault-replay/1", "command": "clients", "seed": 1, "kinds": ["drop-answers"],
            "servers": 1, "actors": 3, "batches": 4, "budget_s": 20, "clients": 1, "loss": 0,
            "client": f"{evil}:Broken", "keep": None, "rules": ["linearizability"]}
    provision = {"command": "true {project} {actor} {token_file}"}
    config = write_target(tmp_path / "t.toml", "http://127.0.0.1:9", provision=provision)
    for client, extra, says in ((f"{evil}:Broken", [], f"give --client {evil}:Broken"),
                                (None, ["--client", f"{evil}:Broken"], "the kit's own client: drop --client")):
        replay = tmp_path / "replay.json"
        replay.write_text(json.dumps({**case, "client": client}))
        assert main(["replay", str(replay), "--config", str(config), *extra]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
        assert not marker.exists()  # the file names the class; only the command line loads one


class _Client:
    """A stand-in for the client: a completed handoff at revision 4, and what its later calls say."""

    def __init__(self, recovered: bool, moves: bool) -> None:
        self.recovered, self.moves, self.revision = recovered, moves, 4

    def status(self, handoff_id: str) -> dict[str, Any]:
        return {"revision": self.revision}

    def accept(self, handoff_id: str) -> dict[str, Any]:
        return {"recovered": True, "receipt": None}

    def return_result(self, handoff_id: str, fact_id: str, outcome: str) -> dict[str, Any]:
        self.revision += self.moves
        return {"recovered": self.recovered, "receipt": None}


@pytest.mark.parametrize(("recovered", "moves", "says"), [
    (True, False, None),
    (False, False, "a later return of its completed work did not recover it"),
    (True, True, "moved its revision 4 to 5"),
])
def test_a_later_run_must_recover_without_moving_the_handoff(recovered: bool, moves: bool, says: str | None) -> None:
    problems = _later_run(_Client(recovered, moves), "h-1", "fact-1")  # type: ignore[arg-type]
    if says is None:
        assert problems == []
    else:
        assert len(problems) == 1 and says in problems[0], problems


@pytest.mark.parametrize(("argv", "says"), [
    (["--faults", "drop-answers"], "--faults needs a server"),
    (["--faults", "pause", "--url", "http://127.0.0.1:9", "--project", "p"], "needs the target file's [serve]"),
    # The clients' races are not modelled under a moved clock, so a jump is refused, not run.
    (["--faults", "clock-jump", "--url", "http://127.0.0.1:9", "--project", "p"], "does not apply to clients yet"),
])
def test_faults_without_a_server_to_fault_are_one_line_and_exit_2(argv: list[str], says: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clients", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
