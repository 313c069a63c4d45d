"""A fault hunt (``aidememo-sim run --faults ... --workers 2``) whose target file's ``[serve]``
command names ``{port}`` and ``{dir}``: each shard starts, provisions and faults a server of its
own. Against the reference nothing is found, twice the same; a server that keeps its receipts in
memory is found through its shards' kills, and found again by the same command."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from simulations.cli import main
from simulations.faults.schedule import FaultSchedule
from simulations.shards import shard_seed
from simulations.targets import serves_apart
from tests.sim.test_faults import MUTANTS, REF, _target

pytest.importorskip("distributed")


def _hunt(tmp: Path, config: Path, faults: str, seed: int, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", "--config", str(config), "--faults", faults, "--seed", str(seed), "--batches", "6",
                 "--budget", "120", "--workers", "2", "--out", str(tmp)])
    return code, capsys.readouterr().out


def _shard_reports(tmp: Path, seed: int) -> list[dict[str, Any]]:
    return [json.loads((tmp / f"faults-seed-{shard_seed(seed, i)}" / "faults.json").read_text()) for i in (0, 1)]


def _ports(tmp: Path, seed: int) -> set[str]:
    """The ports the shards' servers listened on, from each shard's own server log."""
    logs = [(tmp / f"faults-seed-{shard_seed(seed, i)}" / "serve.log").read_text() for i in (0, 1)]
    return {port for log in logs for port in re.findall(r"http://127\.0\.0\.1:(\d+)", log)}


def test_each_shard_faults_a_reference_of_its_own_and_finds_nothing_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Root seed 10: shard 0 is killed in batch 2 and loses answers in 5; shard 1 loses answers in
    # 3 and is killed in 4.
    config = _target(tmp_path / "served.toml", [REF])
    schedules = []
    for attempt in ("a", "b"):
        code, out = _hunt(tmp_path / attempt, config, "kill,drop-answers", 10, capsys)
        assert code == 0, out
        assert "each shard starts a server of its own" in out and "runs in one shard" not in out
        assert "hunt: 2 of 2 shards run, 0 lost" in out and "0 distinct findings" in out, out
        reports = _shard_reports(tmp_path / attempt, 10)
        assert all(r["findings"] == [] and r["verdict"] == "ok" and r["injected"]["kills"] == 1 for r in reports)
        assert len(_ports(tmp_path / attempt, 10)) == 2  # two servers, one per shard
        schedules.append([[(f["batch"], f["kind"]) for f in r["schedule"]] for r in reports])
    assert schedules[0] == schedules[1] == [[(2, "kill"), (5, "drop-answers")], [(3, "drop-answers"), (4, "kill")]]


def test_receipts_kept_in_memory_are_found_by_the_shards_kills_twice(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # Root seed 6: shard 0 is killed in batch 3, shard 1 in batch 2.
    assert [[f.batch for f in FaultSchedule(shard_seed(6, i), ("kill",)).upto(6)] for i in (0, 1)] == [[3], [2]]
    config = _target(tmp_path / "mutant.toml", [sys.executable, str(MUTANTS), "memory_receipts"])
    for attempt in ("a", "b"):
        code, out = _hunt(tmp_path / attempt, config, "kill", 6, capsys)
        assert code == 1, out
        assert "1 distinct findings" in out and "finding 1: receipts survive restarts, found by shards 0, 1" in out, out
        assert "the shard alone: aidememo-sim run --seed " in out and "--faults kill" in out
    _replays_on_the_variant_not_the_reference(out, config, tmp_path, capsys)


def _replays_on_the_variant_not_the_reference(out: str, config: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The finding's shard shrank it on its own server and wrote its replay file, as a one-process
    run does; the printed replay shows it again on the variant, twice, and not on the reference."""
    printed = [line.split(": ", 1)[1] for line in out.splitlines()
               if line.startswith("  replay it, with its shrunk fault schedule: ")]
    assert printed and all(words.startswith("aidememo-sim replay ") for words in printed), out
    words = shlex.split(printed[0])
    at = words.index("--config") + 1
    assert words[at] == str(config) and Path(words[2]).name == "replay.json", words
    reference = _target(tmp_path / "reference.toml", [REF])
    for against, shown in ((config, 1), (config, 1), (reference, 0), (reference, 0)):
        assert main([*words[1:at], str(against), *words[at + 1:]]) == shown
        said = capsys.readouterr().out
        assert f"reproduced {5 * shown}/5" in said, said


def test_a_serve_command_runs_per_shard_only_with_both_placeholders(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    for command, apart in ((["srv", "--port", "{port}", "--data", "{dir}"], True), ("srv {port} {dir}/db", True),
                           (["srv", "--port", "{port}"], False), (["srv", "--data", "{dir}"], False)):
        config.write_text(f"[serve]\ncommand = {json.dumps(command)}\n", encoding="utf-8")
        assert serves_apart(config) is apart, command
    config.write_text('url = "http://127.0.0.1:9"\n', encoding="utf-8")
    assert not serves_apart(config)


def _clients_hunt(tmp: Path, config: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["clients", "--config", str(config), "--seed", "10", "--rounds", "8", "--workers", "2", "--out",
                 str(tmp), *extra])
    return code, capsys.readouterr().out


def test_the_clients_shards_fault_servers_of_their_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Root seed 10: shard 0 loses answers in rounds 2, 5 and 7, shard 1 in 3, 4 and 6 (and the
    # kills of the clean run fall among them).
    config = _target(tmp_path / "served.toml", [REF])
    code, out = _clients_hunt(tmp_path / "clean", config, capsys, "--clients", "3", "--faults", "kill,drop-answers")
    assert code == 0 and "hunt: 2 of 2 shards run, 0 lost" in out and "0 distinct findings" in out, out
    reports = [json.loads((tmp_path / "clean" / f"clients-faults-seed-{shard_seed(10, i)}" / "faults.json").read_text())
               for i in (0, 1)]
    assert all(r["findings"] == [] and r["verdict"] == "ok" for r in reports), reports
    logs = [(tmp_path / "clean" / f"clients-faults-seed-{shard_seed(10, i)}" / "serve.log").read_text() for i in (0, 1)]
    assert len({port for log in logs for port in re.findall(r"http://127\.0\.0\.1:(\d+)", log)}) == 2
    mutant = _target(tmp_path / "mutant.toml", [sys.executable, str(MUTANTS), "retry_second_transition"])
    for attempt in ("a", "b"):
        code, out = _clients_hunt(tmp_path / attempt, mutant, capsys, "--clients", "1", "--loss", "0", "--faults",
                                  "drop-answers")
        assert code == 1 and "finding 1: linearizability, found by shards 0, 1" in out, out
        assert "the shard alone: aidememo-sim clients --seed " in out and "--faults drop-answers" in out
    _replays_on_the_variant_not_the_reference(out, mutant, tmp_path, capsys)


def test_a_fault_shard_publishes_its_counts_batch_by_batch(tmp_path: Path) -> None:
    # What the hunt's live line shows of a running shard: a fault shard published nothing until it ended.
    from simulations.shards import ShardSpec, _fault_shard

    config = _target(tmp_path / "served.toml", [REF])
    heard: list[tuple[float, int]] = []
    spec = ShardSpec(root_seed=10, index=0, actors=3, budget_s=60, max_batches=4, factory=None, out=str(tmp_path),
                     config=str(config), faults=("drop-answers",), alone="aidememo-sim run --seed {seed}")
    outcome = _fault_shard(spec, lambda seconds, operations, found: heard.append((seconds, operations)))
    assert len(heard) == 4 and outcome.batches == 4, heard
    counts = [operations for _, operations in heard]
    assert counts == sorted(counts) and counts[0] > 0


def test_each_shard_of_a_serve_list_starts_every_server_of_it_apart(tmp_path: Path) -> None:
    # [[serve]] tables each naming {port} and {dir}: a shard starts all of them, each on a port of
    # its own, on one data folder of the shard's own (two references on one SQLite file here).
    import httpx
    import tomli_w

    from simulations.targets import served_apart

    one = {"command": [REF, "serve", "--database", "{dir}/ref.sqlite", "--bind", "127.0.0.1:{port}"]}
    config = tmp_path / "two.toml"
    config.write_text(tomli_w.dumps({"serve": [one, one], "provision": {"command": (
        f"{REF} bootstrap --database {{dir}}/ref.sqlite --tenant-id {{tenant}} --project-id {{project}} "
        "--actor-id {actor} --token-file {token_file} --role {role}")}}), encoding="utf-8")
    assert serves_apart(config)
    with served_apart(config, tmp_path / "a") as (first, _), served_apart(config, tmp_path / "b") as (second, _):
        servers = [first, *first.others, second, *second.others]
        assert len(servers) == 4 and len({s.url for s in servers}) == 4
        assert all(httpx.get(f"{s.url}/health").status_code == 200 for s in servers)
        assert first.others[0].served.dir == first.served.dir != second.served.dir == second.others[0].served.dir
    assert not any(s.running for s in servers)
    assert (tmp_path / "a" / "serve-2.log").exists() and (tmp_path / "b" / "serve-2.log").exists()
    one["command"] = [w.replace("{dir}/", "/tmp/") for w in one["command"]]  # a table without {dir}: shared data
    config.write_text(tomli_w.dumps({"serve": [one, one]}), encoding="utf-8")
    assert not serves_apart(config)
