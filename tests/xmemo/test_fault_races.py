"""Faults under the XMemo races (``aidememo-sim xmemo run --config target.toml --faults ...``):
against the XMemo reference served through ``[serve]`` nothing is found, twice the same; a server
that keeps its idempotency keys in memory only is found by a kill, and not without one; kinds and
targets a fault cannot apply to are refused in one line."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from simulations.cli import main
from simulations.errors import SimulationError
from simulations.faults.xmemo import refuse_faults

MUTANTS = Path(__file__).with_name("fault_mutants.py")
REF = shutil.which("aidememo-ref", path=str(Path(sys.executable).parent)) or "aidememo-ref"
ALL = "kill,pause,drop-answers,reset"


def _target(path: Path, serve: list[str]) -> Path:
    path.write_text(tomli_w.dumps({
        "profile": "xmemo",
        "timeout_s": 10,
        "serve": {"command": [*serve, "serve", "--database", "{dir}/xmemo.sqlite", "--bind", "127.0.0.1:{port}"]},
        "provision": {"command": f"{REF} xmemo bootstrap --database {{dir}}/xmemo.sqlite --owner-id {{owner}} "
                                 "--project-id {project} --scopes {scopes} --key-file {token_file}"},
    }), encoding="utf-8")
    return path


def _run(tmp: Path, config: Path, seed: int, capsys: pytest.CaptureFixture[str],
         *extra: str) -> tuple[int, str, dict[str, Any] | None]:
    code = main(["xmemo", "run", "--config", str(config), "--seed", str(seed), "--batches", "12", "--out", str(tmp),
                 *extra])
    out = capsys.readouterr().out
    report = tmp / f"xmemo-faults-seed-{seed}" / "faults.json"
    return code, out, json.loads(report.read_text()) if report.exists() else None


def test_the_races_under_every_fault_kind_find_nothing_in_the_served_reference_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Seed 8 over the four kinds: answers dropped in batches 3 and 7, kills in 4 and 8, a pause
    # in 5, resets in 6.
    config = _target(tmp_path / "xmemo.toml", [REF, "xmemo"])
    reports = []
    for attempt in ("a", "b"):
        code, out, report = _run(tmp_path / attempt, config, 8, capsys, "--faults", ALL)
        assert code == 0 and report is not None, out
        reports.append(report)
        summary = out.strip().splitlines()[-1]
        assert summary.startswith("2 kills, 1 pauses, ") and summary.endswith("verdict OK"), out
        assert "replay this run with: aidememo-sim xmemo run --seed 8 " in out and f"--faults {ALL}" in out
    first, second = reports
    assert [(f["batch"], f["kind"]) for f in first["schedule"]] == [
        (3, "drop-answers"), (4, "kill"), (5, "pause"), (6, "reset"), (7, "drop-answers"), (8, "kill")]
    same = ("schedule", "verdict", "findings")
    assert [first[k] for k in same] == [second[k] for k in same]
    assert first["findings"] == [] and len(first["recovery_s"]) == 2


def test_keys_kept_in_memory_are_found_by_a_kill_and_replayed_from_the_replay_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _target(tmp_path / "mutant.toml", [sys.executable, str(MUTANTS), "memory_keys"])
    code, out, _ = _run(tmp_path / "none", config, 8, capsys)
    assert code == 0 and "0 violations" in out, out  # without a restart the keys it remembers are enough
    code, out, report = _run(tmp_path / "a", config, 8, capsys, "--faults", "kill")
    assert code == 1 and report is not None, out
    assert "keyed captures survive restarts" in {f["rule"] for f in report["findings"]}, out
    assert "replay it, with its fault schedule: aidememo-sim xmemo run --seed 8 " in out
    replay = tmp_path / "a" / "xmemo-faults-seed-8" / "replay.json"
    assert json.loads(replay.read_text())["command"] == "xmemo"
    assert f"aidememo-sim replay {replay} --config {config} --times 5" in out
    # Each replay bootstraps a fresh owner: shown again on this server, not on the reference.
    for target, shown in ((config, 1), (_target(tmp_path / "reference.toml", [REF, "xmemo"]), 0)):
        assert main(["replay", str(replay), "--config", str(target)]) == shown
        said = capsys.readouterr().out
        assert f"reproduced {shown}/1" in said and "the XMemo races of seed 8" in said, said


@pytest.mark.parametrize(("argv", "says"), [
    (["--faults", "drop-answers"], "--faults needs an XMemo server"),
    (["--faults", "kill", "--url", "http://127.0.0.1:9", "--key", "k" * 24], "needs the target file's [serve]"),
])
def test_faults_without_a_server_to_fault_are_one_line_and_exit_2(argv: list[str], says: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["xmemo", "run", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_kind_with_nothing_to_act_on_in_xmemo_is_refused_with_its_reason() -> None:
    refuse_faults(("kill", "pause", "drop-answers", "reset"))
    with pytest.raises(SimulationError, match="--faults clock-jump does not apply to xmemo run: XMemo has no test "):
        refuse_faults(("reset", "clock-jump"))


def test_each_shard_faults_an_xmemo_server_of_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Root seed 10 with kills only: shard 0 is killed in batches 2 and 5, shard 1 in 3 and 4.
    pytest.importorskip("distributed")
    from simulations.shards import shard_seed

    config = _target(tmp_path / "mutant.toml", [sys.executable, str(MUTANTS), "memory_keys"])
    code = main(["xmemo", "run", "--config", str(config), "--seed", "10", "--batches", "6", "--budget", "120",
                 "--workers", "2", "--faults", "kill", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    # The census's second memory under a key (the campaign's own check) or the resent capture's
    # new memory (the audit), whichever the shard names first: one distinct finding, both shards.
    assert code == 1 and "1 distinct findings" in out, out
    assert re.search(r"finding 1: (idempotency|keyed captures survive restarts), found by shards 0, 1 ", out), out
    assert "the shard alone: aidememo-sim xmemo run --seed " in out and "--faults kill" in out
    logs = [(tmp_path / f"xmemo-faults-seed-{shard_seed(10, i)}" / "serve.log").read_text() for i in (0, 1)]
    assert all("serving http://127.0.0.1:" in log for log in logs) and logs[0] != logs[1]
