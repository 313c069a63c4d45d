"""Proof that each xmemo check bites: the profile against broken XMemo references.

Every mutant of ``mutants.py`` must be killed by the checks of every requirement it names (a
MUST's check reads FAIL, a SHOULD's WARN; for an ``ID:clause`` entry, a check that reads that
clause), and the unbroken reference must pass the whole profile. Each mutant meets only the
checks of its own requirements; the matrix (mutant x family) is printed.
One test computes the whole matrix, so that xdist runs it once (a module fixture would run once
per worker).
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

from .mutants import MUTANTS

HERE = Path(__file__).parent
SEED = "20261201"
# What kills a mutant: a check that ran and failed (WARN is a failed SHOULD). A check that could
# not run kills nothing; the reference must read PASS everywhere.
KILLED = {"FAIL", "WARN"}


def _family(requirement_id: str) -> str:
    return re.sub(r"-\d+$", "", requirement_id)


def _run(name: str, report_dir: Path) -> list[dict[str, Any]]:
    args = [sys.executable, "-m", "conformance.cli", "run", "--profile", "xmemo", "--seed", SEED,
            "--report-dir", str(report_dir)]
    if name != "reference":
        args += ["--embedded-factory", f"mutants:{name}"]
        for requirement in MUTANTS[name][1]:
            args += ["--requirement", requirement.partition(":")[0]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=report_dir.parent)
    results = report_dir / "results.json"
    assert results.exists(), f"{name}: no results.json (exit {done.returncode})\n{done.stderr[-2000:]}"
    if name == "reference":
        assert done.returncode == 0, done.stdout[-2000:]
    return json.loads(results.read_text())["records"]  # type: ignore[no-any-return]


def test_every_broken_reference_is_killed_by_its_requirement(tmp_path: Path) -> None:
    base = tmp_path
    names = ["reference", *MUTANTS]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: two suites at a time
        runs = dict(zip(names, pool.map(lambda n: _run(n, base / n), names)))
    families = sorted({_family(r["requirement"]) for r in runs["reference"]})
    width = max(map(len, names)) + 2
    lines = ["xmemo kill matrix (K = a check of the family failed, . = its checks held, - = not run)",
             " " * width + " ".join(f.removeprefix("XM-") for f in families)]
    for name in names:
        ran = {_family(r["requirement"]) for r in runs[name]}
        failed = {_family(r["requirement"]) for r in runs[name] if r["verdict"] in KILLED}
        cells = ("K" if f in failed else "." if f in ran else "-" for f in families)
        lines.append(f"{name:<{width}}" + " ".join(c.center(len(f.removeprefix("XM-"))) for c, f in zip(cells, families)))
    shown = "\n".join(lines)
    print(shown)
    bad = [(r["nodeid"], r["verdict"], r["reason"][:200]) for r in runs["reference"] if r["verdict"] != "PASS"]
    assert not bad and len(runs["reference"]) >= 60, bad
    survivors = {}
    for name, (_, wanted) in MUTANTS.items():
        failed = {f"{r['requirement']}{clause}" for r in runs[name] if r["verdict"] in KILLED
                  for clause in ("", *(f":{c}" for c in r["clauses"]))}
        if set(wanted) - failed:
            survivors[name] = sorted(set(wanted) - failed)
    assert not survivors, f"broken references that survived their checks: {survivors}\n{shown}"
