"""Proof that each check bites: the whole suite against broken reference ledgers.

Every mutant of ``mutants.py`` must be killed by the checks of the requirements it names
(at least one of their checks reads FAIL; for an ``ID:clause`` entry, a check that reads that
clause), and the unbroken reference must pass the whole suite. The matrix mutant x
requirement family is printed, so a reader sees what each green mark is worth. By default a
mutant meets only the checks of its own families (``-`` in the matrix; a mutant naming clauses
meets only its requirements' checks); the ``slow`` test runs the whole suite against every mutant.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.suite.mutants import MUTANTS

HERE = Path(__file__).parent
SEED = "20261130"
BAD = {"FAIL", "UNTESTABLE", "UNKNOWN", "ERROR", "XPASS"}


def _family(requirement_id: str) -> str:
    return re.sub(r"-\d+$", "", requirement_id.partition(":")[0])


def _killed(records: list[dict], entry: str) -> bool:
    """A check of ``entry``'s requirement (reading its clause, when it names one) failed."""
    requirement, _, clause = entry.partition(":")
    return any(r["requirement"] == requirement and r["verdict"] == "FAIL" and (not clause or clause in r["clauses"])
               for r in records)


def _selection(entries: tuple[str, ...]) -> list[str]:
    """The --requirement flags meeting a mutant with its families (only its requirement, for a clause)."""
    wanted = sorted({e.partition(":")[0] if ":" in e else _family(e) + "-" for e in entries})
    return [flag for prefix in wanted for flag in ("--requirement", prefix)]


def _run(name: str, report_dir: Path, whole: bool) -> list[dict]:
    args = [sys.executable, "-m", "conformance.cli", "run", "--seed", SEED, "--report-dir", str(report_dir)]
    if name != "reference":
        args += ["--embedded-factory", f"mutants:{name}"]
        if not whole:
            args += _selection(MUTANTS[name][1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    results = report_dir / "results.json"
    assert results.exists(), f"{name}: no results.json (exit {done.returncode})\n{done.stderr[-2000:]}"
    return json.loads(results.read_text())["records"]


def _matrix(base: Path, whole: bool, terminal: tuple | None = None) -> dict[str, list[dict]]:
    names = ["reference", *MUTANTS]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: two suites at a time
        runs = dict(zip(names, pool.map(lambda n: _run(n, base / n, whole), names)))
    families = sorted({_family(r["requirement"]) for r in runs["reference"]})
    width = max(map(len, names)) + 2
    lines = ["", "kill matrix (K = a check of the family failed, . = its checks held, s = not scored, - = not run)",
             " " * width + " ".join(f.removeprefix("AM-") for f in families)]
    for name in names:
        ran = {_family(r["requirement"]) for r in runs[name]}
        scored = {_family(r["requirement"]) for r in runs[name] if r["verdict"] != "SKIP"}
        failed = {_family(r["requirement"]) for r in runs[name] if r["verdict"] in BAD}
        cells = ("K" if f in failed else "." if f in scored else "s" if f in ran else "-" for f in families)
        row = " ".join(cell.center(len(f.removeprefix("AM-"))) for cell, f in zip(cells, families))
        lines.append(f"{name:<{width}}{row}")
    if terminal is not None:  # shown in every run, not only under -s
        terminal, capture = terminal
        with capture.global_and_fixture_disabled():
            terminal.write("\n".join(lines) + "\n")
    else:
        print("\n".join(lines))
    (base / "kill-matrix.txt").write_text("\n".join(lines) + "\n")
    return runs


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, pytestconfig) -> dict[str, list[dict]]:
    plugins = pytestconfig.pluginmanager
    terminal = (plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager"))
    return _matrix(tmp_path_factory.mktemp("kill-matrix"), whole=False, terminal=terminal)


def test_reference_passes_every_check(matrix):
    bad = [(r["nodeid"].rsplit("/", 1)[-1], r["verdict"], r["reason"][:200]) for r in matrix["reference"]
           if r["verdict"] in BAD]
    assert not bad, f"the unbroken reference fails: {bad}"


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed_by_its_requirements(matrix, name):
    _, requirements = MUTANTS[name]
    records = matrix[name]
    survived = [entry for entry in requirements if not _killed(records, entry)]
    assert not survived, f"mutant {name} survives the checks of {survived}"


@pytest.mark.slow
def test_whole_suite_against_every_mutant(tmp_path):
    runs = _matrix(tmp_path, whole=True)
    for name, (_, requirements) in MUTANTS.items():
        assert any(_killed(runs[name], entry) for entry in requirements), name


def test_a_claimed_capability_is_scored(tmp_path):
    # The reference serves the MCP gateway and binds tokens: those checks must run and pass, not skip.
    records = _run_with_factory(None, tmp_path, ["--requirement", "AM-MCP-", "--requirement", "AM-BIND-"])
    assert records and {r["verdict"] for r in records} == {"PASS"}, [(r["nodeid"], r["verdict"]) for r in records]


def _run_with_factory(factory: str | None, report_dir: Path, extra: list[str]) -> list[dict]:
    return _results(factory, report_dir, extra)["records"]


def _results(factory: str | None, report_dir: Path, extra: list[str]) -> dict:
    args = [sys.executable, "-m", "conformance.cli", "run", "--seed", SEED, "--report-dir", str(report_dir),
            *(["--embedded-factory", f"mutants:{factory}"] if factory else []), *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    return json.loads((report_dir / "results.json").read_text())


def test_a_seed_replays_the_same_requests(tmp_path):
    # Failing checks carry transcripts. The same seed sends the same requests, in a namespace of its
    # own each run (the run tag inside every id); with the run tag fixed too, byte for byte.
    extra = ["--requirement", "AM-HO-1"]
    runs = [_results("wrong_actor_allowed", tmp_path / f"run{i}", extra) for i in range(2)]
    exact = [_results("wrong_actor_allowed", tmp_path / f"exact{i}", [*extra, "--run-tag", "exact"]) for i in range(2)]

    def requests(results, rebase=True):
        tag = results["run_tag"] if rebase else "\0"
        return {r["nodeid"]: [(e["method"], e["url"].split("/", 3)[-1].replace(tag, "RUN"),
                               e["request_body"].replace(tag, "RUN")) for e in r["transcript"]]
                for r in results["records"] if r.get("transcript")}

    first, second = map(requests, runs)
    assert first and first == second
    assert runs[0]["run_tag"] != runs[1]["run_tag"], "each run gets a namespace of its own"
    assert requests(exact[0], rebase=False) == requests(exact[1], rebase=False)
    assert requests(exact[0]) == first
