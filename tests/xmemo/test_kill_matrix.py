"""Proof that each xmemo check bites: the profile against broken XMemo references.

Every mutant of ``mutants.py`` must be killed by the checks of the requirements it names (at
least one of them reads FAIL), and the unbroken reference must pass the whole profile. Each
mutant meets only the checks of its own families; the matrix (mutant x family) is printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .mutants import MUTANTS

HERE = Path(__file__).parent
SEED = "20261201"
BAD = {"FAIL", "UNTESTABLE", "UNKNOWN", "ERROR", "XPASS"}


def _family(requirement_id: str) -> str:
    return re.sub(r"-\d+$", "", requirement_id)


def _run(name: str, report_dir: Path) -> list[dict[str, Any]]:
    args = [sys.executable, "-m", "conformance.cli", "run", "--profile", "xmemo", "--seed", SEED,
            "--report-dir", str(report_dir)]
    if name != "reference":
        args += ["--embedded-factory", f"mutants:{name}"]
        for family in sorted({_family(rid) for rid in MUTANTS[name][1]}):
            args += ["--requirement", family + "-"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=report_dir.parent)
    results = report_dir / "results.json"
    assert results.exists(), f"{name}: no results.json (exit {done.returncode})\n{done.stderr[-2000:]}"
    return json.loads(results.read_text())["records"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    base = tmp_path_factory.mktemp("xmemo-kill-matrix")
    names = ["reference", *MUTANTS]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: two suites at a time
        runs = dict(zip(names, pool.map(lambda n: _run(n, base / n), names)))
    families = sorted({_family(r["requirement"]) for r in runs["reference"]})
    width = max(map(len, names)) + 2
    lines = ["xmemo kill matrix (K = a check of the family failed, . = its checks held, - = not run)",
             " " * width + " ".join(f.removeprefix("XM-") for f in families)]
    for name in names:
        ran = {_family(r["requirement"]) for r in runs[name]}
        failed = {_family(r["requirement"]) for r in runs[name] if r["verdict"] in BAD}
        cells = ("K" if f in failed else "." if f in ran else "-" for f in families)
        lines.append(f"{name:<{width}}" + " ".join(c.center(len(f.removeprefix("XM-"))) for c, f in zip(cells, families)))
    print("\n".join(lines))
    return runs


def test_the_reference_passes_every_xmemo_check(matrix: dict[str, list[dict[str, Any]]]) -> None:
    bad = [(r["nodeid"], r["verdict"], r["reason"][:200]) for r in matrix["reference"] if r["verdict"] != "PASS"]
    assert not bad, bad
    assert len(matrix["reference"]) >= 60


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_broken_reference_is_killed_by_its_requirement(matrix: dict[str, list[dict[str, Any]]], name: str) -> None:
    wanted = set(MUTANTS[name][1])
    failed = {r["requirement"] for r in matrix[name] if r["verdict"] in BAD}
    assert wanted & failed == wanted, f"{name} survived the checks of {sorted(wanted - failed)}; failed: {sorted(failed)}"
