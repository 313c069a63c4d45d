"""Writes never follow links: a symbolic link planted in an output folder is replaced, its target untouched.

Output folders are often shared (a CI workspace, ``reports/``): whoever can write there can plant
``results.json -> ~/.bashrc``. Each test plants links at the names a command writes, runs it, and
checks that every target still holds what it held and each name is now a plain file. Case files
of an earlier diff that this run did not write are removed, and ``baseline write`` refuses to
replace a baseline (often edited by hand) without ``--force``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conformance import cli
from refkit.files import open_fresh, write_atomic
from simulations.campaign import run_campaign
from simulations.replay import export_failure

VICTIM_TEXT = "precious: never overwritten by the kit\n"


def _plant(folder: Path, names: list[str], victims: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    victims.mkdir(parents=True, exist_ok=True)
    planted = {}
    for name in names:
        victim = victims / f"victim-{name}"
        victim.write_text(VICTIM_TEXT)
        (folder / name).symlink_to(victim)
        planted[name] = victim
    return planted


def _untouched(folder: Path, planted: dict[str, Path]) -> None:
    for name, victim in planted.items():
        assert victim.read_text() == VICTIM_TEXT, f"{name} was written through its link into {victim}"
        assert not (folder / name).is_symlink() and (folder / name).is_file(), f"{name} was not replaced"


def test_write_atomic_and_open_fresh_replace_a_link_and_leave_no_temporary_file(tmp_path: Path) -> None:
    planted = _plant(tmp_path / "out", ["a.json", "b.jsonl"], tmp_path / "victims")
    write_atomic(tmp_path / "out" / "a.json", "{}\n", mode=0o600)
    with open_fresh(tmp_path / "out" / "b.jsonl") as handle:
        handle.write("line\n")
    _untouched(tmp_path / "out", planted)
    assert (tmp_path / "out" / "a.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.json", "b.jsonl"]


def test_the_simulators_history_and_failure_files_do_not_follow_links(tmp_path: Path) -> None:
    out = tmp_path / "sim-failures"
    names = ["run-seed-7.jsonl", *(f"race-seed-7.{ext}" for ext in ("json", "jsonl", "html", "sh")),
             "test_race_seed_7.py"]
    planted = _plant(out, names, tmp_path / "victims")
    result = run_campaign(seed=7, actors=2, max_batches=2, budget_s=20, history_file=out / "run-seed-7.jsonl")
    export_failure(result, out, target="embedded")
    _untouched(out, planted)
    assert os.access(out / "race-seed-7.sh", os.X_OK)


def test_the_suites_reports_do_not_follow_links(tmp_path: Path) -> None:
    report = tmp_path / "report"
    planted = _plant(report, ["results.json", "traceability.json", "report.html", "junit.xml"], tmp_path / "victims")
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--report-dir", str(report), "--seed", "1",
                           "test_wire.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    _untouched(report, planted)


def test_diffs_reports_do_not_follow_links_and_old_cases_are_removed(tmp_path: Path, capsys: Any) -> None:
    report = tmp_path / "report"
    planted = _plant(report, ["diff.json", "diff.html"], tmp_path / "victims")
    stale = [report / "divergence-1.json", report / "divergence-1.sh"]
    for path in stale:
        path.write_text("from an earlier run\n")
    (report / "divergence-2.json").symlink_to(tmp_path / "victims" / "victim-diff.json")
    (report / "notes.txt").write_text("the user's\n")
    code = cli.main(["diff", "--report-dir", str(report), "--seed", "3", "--steps", "60"])
    out = capsys.readouterr().out
    assert code == 0, out
    _untouched(report, planted)
    assert not any(path.exists() or path.is_symlink() for path in [*stale, report / "divergence-2.json"])
    assert (report / "notes.txt").read_text() == "the user's\n"  # only the kit's own case files go


def test_baseline_write_refuses_an_existing_file_without_force(tmp_path: Path, capsys: Any) -> None:
    results = tmp_path / "results.json"
    results.write_text('{"profile": "aidememo", "records": []}\n')
    baseline = tmp_path / "baseline.toml"
    baseline.write_text("# edited by hand\n")
    assert cli.main(["baseline", "write", str(results), "-o", str(baseline)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--force" in err, err
    assert baseline.read_text() == "# edited by hand\n"
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    linked = tmp_path / "linked.toml"
    linked.symlink_to(victim)
    assert cli.main(["baseline", "write", str(results), "-o", str(linked), "--force"]) == 0
    assert victim.read_text() == VICTIM_TEXT and not linked.is_symlink()
    assert cli.main(["baseline", "write", str(results), "-o", str(baseline), "--force"]) == 0
    assert "edited by hand" not in baseline.read_text()
