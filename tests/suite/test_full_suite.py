"""The whole suite against the reference: embedded under xdist, and a separately started
``aidememo-ref serve`` reached through a provisioning command template or fixed tokens."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from refkit.process import ReferenceProcess
from tests.targetfile import token_entry, write_target

OK = {"PASS", "SKIP"}
UNSERVED = {"artifacts"}  # the reference serves no artifacts: that requirement alone is not scored
OPT_IN = {"large-projects"}  # a slow tier no run claims unless told (tests/suite/test_large_projects.py claims it)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "run", *args], capture_output=True, text=True,
                          timeout=600)


def _records(report: Path) -> list[dict]:
    return json.loads((report / "results.json").read_text())["records"]


def _bad(records: list[dict]) -> list[tuple[str, str, str]]:
    return [(r["nodeid"].rsplit("/", 1)[-1], r["verdict"], r["reason"][:300]) for r in records if r["verdict"] not in OK]


def test_embedded_reference_passes_under_xdist(tmp_path):
    report = tmp_path / "report"
    done = _cli("-n", "2", "--report-dir", str(report))
    records = _records(report)
    assert not _bad(records), _bad(records)
    assert done.returncode == 0, done.stdout[-2000:]
    trace = json.loads((report / "traceability.json").read_text())
    untested = {row["id"] for row in trace if row["level"] == "MUST" and row["status"] != "tested"}
    assert all(row["capability"] in UNSERVED | OPT_IN for row in trace if row["id"] in untested), (
        f"MUSTs without a scored check outside artifacts and the opt-in tier: {sorted(untested)}")
    assert untested == {"AM-ART-1", "AM-EDGE-5"}, sorted(untested)
    assert (report / "report.html").exists() and (report / "junit.xml").exists()
    assert "RESULT: every scored MUST holds" in done.stdout


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[str, Path]]:
    """``aidememo-ref serve --test-clock`` on a free loopback port (the template needs the console script)."""
    if shutil.which("aidememo-ref") is None:
        pytest.fail("aidememo-ref is not installed (pip install -e .)")
    database = tmp_path / "ledger.sqlite"
    with ReferenceProcess.start(database, test_clock=True) as server:
        yield server.url, database


# A sample across families (and the clock extension): a provisioning subprocess per actor makes
# the whole suite slow through a template; the `slow` test below runs all of it.
SUBSET = ["--requirement", "AM-HO-1", "--requirement", "AM-HL-HB-", "--requirement", "AM-ID-1",
          "--requirement", "AM-CMD-2", "--requirement", "AM-CONF-13", "--requirement", "AM-AUTH-3"]


def test_served_reference_through_the_command_template(served, tmp_path):
    url, database = served
    template = (f"aidememo-ref bootstrap --database {database} --tenant-id {{tenant}} --project-id {{project}} "
                f"--actor-id {{actor}} --token-file {{token_file}} --role {{role}}")
    report = tmp_path / "report"
    done = _cli("--url", url, "--provision-command", template, "--report-dir", str(report), *SUBSET)
    records = _records(report)
    assert not _bad(records), _bad(records)
    assert done.returncode == 0
    assert any(r["requirement"] == "AM-HL-HB-3" and r["verdict"] == "PASS" for r in records), (
        "the test-clock extension of `aidememo-ref serve --test-clock` must be detected and scored")


def test_served_reference_with_fixed_tokens(served, tmp_path):
    url, database = served
    tokens = []
    for actor, role in (("w1", "writer"), ("w2", "writer"), ("w3", "writer"), ("r1", "reader")):
        token_file = tmp_path / f"{actor}.token"
        token_file.write_text(f"fixed-{actor}-token-0123456789\n")
        token_file.chmod(0o600)
        subprocess.run(["aidememo-ref", "bootstrap", "--database", str(database), "--tenant-id", "acme",
                        "--project-id", "fixed", "--actor-id", actor, "--token-file", str(token_file),
                        "--role", role], check=True, capture_output=True, timeout=60)
        tokens.append(token_entry("fixed", actor, role, token_file=token_file.name))
    config = write_target(tmp_path / "target.toml", url, tokens)
    report = tmp_path / "report"
    done = _cli("--config", str(config), "--report-dir", str(report), *SUBSET)
    records = _records(report)
    assert not _bad(records), _bad(records)
    assert done.returncode == 0
    skipped = {r["requirement"] for r in records if r["verdict"] == "SKIP"}
    assert "AM-CONF-13" in skipped, "a check needing a fresh project is not scored with fixed tokens"
    assert any(r["verdict"] == "PASS" and r["requirement"].startswith("AM-HO-") for r in records)


@pytest.mark.slow
def test_whole_suite_against_the_served_reference(served, tmp_path):
    url, database = served
    template = (f"aidememo-ref bootstrap --database {database} --tenant-id {{tenant}} --project-id {{project}} "
                f"--actor-id {{actor}} --token-file {{token_file}} --role {{role}}")
    report = tmp_path / "report"
    done = _cli("--url", url, "--provision-command", template, "--report-dir", str(report))
    assert not _bad(_records(report)) and done.returncode == 0
