"""The large-projects tier (AM-EDGE-5): a bulk set-up is one transcript entry, and the tier kills
the mutants of the 10,000-resource bound that every other check lets through.

The fill is 10,000 raw puts sent inside ``Transcript.unrecorded``: a report holds one entry for
them (how many, what, the statuses they got), and the case's reproduction says on its first line
that it cannot run and why (the set-up is not kept request by request). The tier is claimed only
when asked (``--capability large-projects``): under ``-m slow`` the check runs against the
embedded reference (PASS) and against copies of the tree with ``aidememo_ref/_reads.py`` mutated
as ``scripts/mutation.py`` would (each FAIL). A run of the check took 13 to 34 s at load 5 to 10.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.registry import Level
from conformance.reproduction.script import render_script
from conformance.reproduction.suite import ReplayTarget, from_verdict
from conformance.transcript import Transcript
from conformance.verdicts import Verdict, VerdictRecord

ROOT = Path(__file__).resolve().parents[2]
BOUND = "MAX_SNAPSHOT_RESOURCES: Final = 10_000"
CHECK = "if index.resources > MAX_SNAPSHOT_RESOURCES:"
MUTATIONS = {  # name -> (the line of _reads.py, as a mutation tool changes it)
    "bound-plus-one": (BOUND, BOUND.replace("10_000", "10_001")),
    "bound-minus-one": (BOUND, BOUND.replace("10_000", "9_999")),
    "search-at-the-bound": (CHECK, CHECK.replace(">", ">=")),
    "search-only-at-the-bound": (CHECK, CHECK.replace(">", "==")),
    "search-by-identity": (CHECK, CHECK.replace(">", "is")),
}


class _Sent:
    """A stand-in for an exchange: what ``Transcript.record`` reads of one."""

    def __init__(self, status: int) -> None:
        self.status, self.answered = status, True

    def to_dict(self) -> dict[str, object]:
        return {"kind": "http", "method": "GET", "url": "http://127.0.0.1:9/x", "summary": "GET /x", "request": "GET /x",
                "response": str(self.status), "status": self.status}

    def settled(self) -> _Sent:
        return self


def test_an_unrecorded_set_up_is_one_entry_and_its_reproduction_says_why_it_cannot_run() -> None:
    transcript = Transcript()
    with transcript.unrecorded("3 raw puts of custom.note fill-0 .. fill-2") as bulk:
        for status in (200, 200, 503):
            transcript.record(_Sent(status))
    transcript.record(_Sent(413))
    entries = transcript.to_list()
    assert [e["kind"] for e in entries] == ["bulk", "http"] and bulk.count == 3, entries
    assert entries[0]["summary"] == "3 requests not recorded one by one: 3 raw puts of custom.note fill-0 .. fill-2"
    assert entries[0]["response"] == "HTTP 200 x2, HTTP 503 x1"
    record = VerdictRecord(nodeid="test_edges.py::test_x", requirement="AM-EDGE-5", level=Level.MUST,
                           capability="large-projects", verdict=Verdict.FAIL, reason="it failed",
                           transcript=tuple(entries))
    script = render_script(from_verdict(record, ReplayTarget(url="http://127.0.0.1:9")))
    assert script.splitlines()[1] == (
        "# CANNOT RUN: step1 stands for 3 set-up requests the report does not keep one by one (3 raw puts of "
        "custom.note fill-0 .. fill-2); rerun the check with its command. It exits 2."), script.splitlines()[1]


def _verdict(tree: Path, tmp_path: Path) -> dict[str, object]:
    report = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--seed", "1", "--capability",
                           "large-projects", "--requirement", "AM-EDGE-5", "--report-dir", str(report)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tree), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    records = json.loads((report / "results.json").read_text())["records"]
    assert len(records) == 1, done.stdout[-2000:]
    return records[0]


@pytest.mark.slow
def test_the_tier_passes_the_reference(tmp_path: Path) -> None:
    record = _verdict(ROOT, tmp_path)
    assert record["verdict"] == "PASS", record["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_tier_kills_each_mutant_of_the_bound(mutation: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".mypy_cache"))
    reads = tree / "aidememo_ref" / "_reads.py"
    old, new = MUTATIONS[mutation]
    text = reads.read_text()
    assert text.count(old) == 1, old
    reads.write_text(text.replace(old, new))
    record = _verdict(tree, tmp_path)
    assert record["verdict"] == "FAIL", f"{mutation} survives AM-EDGE-5: {record['verdict']} {record['reason']}"
