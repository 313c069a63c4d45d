"""``aidememo-conformance compare``: requirement x run from a clean run and a run behind a planted bug
(``mutants.reader_can_write``), the pull-request gate (``--fail-on-new``), badges, and results files
read as data (bad ones are one line and exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.errors import ConfigError
from conformance.reports import compare as compare_module
from conformance.reports.compare import load_results

HERE = Path(__file__).parent


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of the AM-AUTH checks: the reference (clean) and a variant where readers can write (bug)."""
    where = tmp_path_factory.mktemp("runs")
    clean = _cli("run", "--requirement", "AM-AUTH", "--report-dir", "clean", cwd=where)
    assert clean.returncode == 0, clean.stdout[-2000:]
    bug = _cli("run", "--requirement", "AM-AUTH", "--embedded-factory", "mutants:reader_can_write",
               "--report-dir", "bug", cwd=where)
    assert bug.returncode == 1, bug.stdout[-2000:]
    return where


def test_a_planted_bug_is_a_new_failure_and_fails_the_gate(runs):
    done = _cli("compare", "clean/results.json", "bug/results.json", "-o", "cmp", "--fail-on-new", cwd=runs)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "new failure: AM-AUTH-4 (MUST) held in clean, FAIL in bug" in done.stdout
    data = json.loads((runs / "cmp" / "compare.json").read_text())
    assert [f["requirement"] for f in data["new_failures"]] == ["AM-AUTH-4"]
    assert [(r["label"], r["musts_held"], r["musts_scored"]) for r in data["runs"]] == [("clean", 5, 5), ("bug", 4, 5)]
    assert data["protocol_commit"] == "e2a15d4" and data["runs"][0]["health"]["status"] == "ok"
    row = next(r for r in data["requirements"] if r["id"] == "AM-AUTH-4")
    assert row["level"] == "MUST" and row["text"] and [c["verdict"] for c in row["runs"]] == ["PASS", "FAIL"]
    assert ">4/5 MUSTs<" in (runs / "cmp" / "badge-bug.svg").read_text()
    assert ">5/5 MUSTs<" in (runs / "cmp" / "badge-clean.svg").read_text()
    page = (runs / "cmp" / "compare.html").read_text()
    assert "core &middot; MUST" in page and "AM-AUTH-4" in page and "held in clean, FAIL in bug" in page


def test_a_fix_is_no_new_failure_and_without_the_gate_a_failure_exits_0(runs):
    fixed = _cli("compare", "bug/results.json", "clean/results.json", "-o", "cmp2", "--fail-on-new", cwd=runs)
    assert fixed.returncode == 0 and "new failure" not in fixed.stdout, fixed.stdout + fixed.stderr
    ungated = _cli("compare", "clean/results.json", "bug/results.json", "-o", "cmp3", "--label", "main",
                   "--label", "pr", cwd=runs)
    assert ungated.returncode == 0 and "held in main, FAIL in pr" in ungated.stdout
    assert (runs / "cmp3" / "badge-pr.svg").is_file()


def _bad(tmp_path: Path, name: str, content: object) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


_RECORD = {"requirement": "AM-AUTH-1", "level": "MUST", "capability": "core", "verdict": "PASS"}


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json", "not JSON"),
    ([1, 2], "no list of records"),
    ({"profile": "aidememo", "records": [{**_RECORD, "verdict": "GREAT"}]}, "records[0].verdict"),
    ({"profile": "aidememo", "records": [{**_RECORD, "verdict": ["PASS"]}]}, "records[0].verdict"),
    ({"profile": "aidememo", "records": [{**_RECORD, "level": "OUGHT"}]}, "records[0].level"),
    ({"profile": "aidememo", "records": [{**_RECORD, "requirement": 7}]}, "records[0].requirement"),
    ({"profile": "aidememo", "records": ["x"]}, "records[0]: expected an object"),
    ({"records": []}, "profile"),
])
def test_a_bad_results_file_is_one_line_and_exit_2(tmp_path, content, needle):
    path = _bad(tmp_path, "results.json", content)
    done = _cli("compare", path, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and path in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_runs_of_two_profiles_and_missing_files_are_refused(tmp_path):
    one = _bad(tmp_path, "a.json", {"profile": "aidememo", "records": [_RECORD]})
    other = _bad(tmp_path, "b.json", {"profile": "xmemo", "records": []})
    mixed = _cli("compare", one, other, cwd=tmp_path)
    assert mixed.returncode == 2 and "different profiles" in mixed.stderr
    missing = _cli("compare", str(tmp_path / "nowhere.json"), cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere.json" in missing.stderr and len(missing.stderr.splitlines()) == 1


def test_deeply_nested_json_is_refused(tmp_path):
    path = _bad(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="not JSON"):
        load_results(path, "deep")


def test_a_results_file_over_the_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(compare_module, "MAX_RESULTS_BYTES", 100)
    path = _bad(tmp_path, "big.json", {"profile": "aidememo", "records": [_RECORD] * 5})
    with pytest.raises(ConfigError, match="larger than"):
        load_results(path, "big")


def test_the_output_is_never_written_through_a_link(tmp_path):
    one = _bad(tmp_path, "a.json", {"profile": "aidememo", "records": [_RECORD]})
    (tmp_path / "out").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "out" / "compare.json").symlink_to(victim)
    done = _cli("compare", one, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert victim.read_text() == "keep"
