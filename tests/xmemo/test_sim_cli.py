"""``aidememo-sim xmemo run`` and the replay of its files from the command line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from simulations.cli import main

from . import races

RACES = str(Path(races.__file__).resolve())


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def command(output: list[str], prefix: str) -> list[str]:
    (line,) = [line for line in output if line.startswith(prefix)]
    words = shlex.split(line[len(prefix):])
    assert words[0] == "aidememo-sim"
    return words[1:]


def test_the_reference_is_clean_with_a_fixed_seed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["xmemo", "run", "--seed", "11", "--batches", "8", "--out", str(tmp_path)]) == 0
    out = lines(capsys)
    assert out[0].startswith("aidememo-sim xmemo run: seed 11,")
    assert command(out, "replay this run with: ")[:4] == ["xmemo", "run", "--seed", "11"]
    summary = next(line for line in out if "batches (the last is the census)" in line)  # after any progress line
    assert "9 batches (the last is the census)" in summary and "0 violations" in summary
    assert list(tmp_path.iterdir()) == []  # nothing to export


def test_a_planted_race_is_found_shrunk_and_the_printed_command_reproduces_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ledger = f"{RACES}:check_then_act"
    assert main(["xmemo", "run", "--seed", "3", "--batches", "6", "--ledger", ledger, "--out", str(tmp_path)]) == 1
    out = lines(capsys)
    assert any(line.startswith("XM-IDEM-1: captures with key") for line in out)
    assert any(line.startswith("shrunk to ") for line in out)
    replay = command(out, "reproduce with: ")
    assert replay[0] == "replay"
    doc = json.loads(Path(replay[1]).read_text())
    assert doc["finding"]["requirement"] == "XM-IDEM-1" and doc["target"]["factory"] == ledger
    assert main([*replay, "--times", "2"]) == 1
    assert lines(capsys)[-1] == "reproduced 2/2"
    assert main(["xmemo", "replay", replay[1], "--ledger", ledger]) == 1
    assert lines(capsys)[-1] == "reproduced 1/1"
    # The printed rerun command finds the same violation again.
    rerun = command(out, "replay this run with: ")
    assert main([*rerun, "--out", str(tmp_path / "again")]) == 1
    again = json.loads((tmp_path / "again" / Path(replay[1]).name).read_text())
    assert (again["plan"], again["schedule"], again["finding"]) == (doc["plan"], doc["schedule"], doc["finding"])
    capsys.readouterr()
    # The same file against the correct reference: no violation, exit 0.
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps(dict(doc, target={"kind": "embedded", "factory": None})))
    assert main(["replay", str(fixed)]) == 0
    assert lines(capsys)[-1] == "reproduced 0/1"


@pytest.mark.parametrize(("argv", "message"), [
    (["xmemo", "run", "--key", "k"], "--key needs --url"),
    (["xmemo", "run", "--url", "http://127.0.0.1:9", "--key", "bob=k"], "unknown agent 'bob'"),
    (["xmemo", "run", "--url", "http://127.0.0.1:9", "--key", "claude=k"], "needs a key for each of claude, codex"),
    (["xmemo", "run", "--url", "http://127.0.0.1:9", "--key", "k", "--ledger", "x.py:y"], "--ledger applies"),
    (["xmemo", "run", "--ledger", "nowhere.py:y"], "cannot load"),
    (["xmemo", "run", "--budget", "0"], "must be positive"),
    (["xmemo", "replay", "missing.json"], "cannot read replay file"),
    (["xmemo"], "required"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("aidememo-sim: ") and message in err, err


def test_an_xmemo_replay_file_refuses_url_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from simulations.xmemo.replay import FORMAT

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"format": FORMAT}))
    assert main(["replay", str(path), "--url", "http://127.0.0.1:9"]) == 2
    assert "embedded XMemo reference" in capsys.readouterr().err


def test_the_command_line_names_the_campaigns_agents() -> None:
    from simulations.commands.xmemo import XMEMO_AGENTS
    from simulations.xmemo.targets import AGENTS

    assert XMEMO_AGENTS == AGENTS  # a copy, so that --help imports no campaign
