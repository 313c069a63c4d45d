"""The plugin seen from pytest: idle cost, verdicts, baseline, reports, listing, xdist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CHECKS = '''
import pytest
from conformance.profiles.aidememo.actors import setup_ok
from conformance.profiles.aidememo.expect import expect_status

@pytest.mark.requirement("AM-HEALTH-1")
def test_pass(world):
    expect_status(world.runtime.wire.request(world.transcript, "GET", "/health"), 200)

@pytest.mark.requirement("AM-ID-1")
def test_must_fails(world):
    project = world.project()
    body = expect_status(project.writer.identity(), 200)
    assert body["role"] == "owner", "planted departure"

@pytest.mark.requirement("AM-WIRE-1", clauses=("unknown-path",))
def test_should_fails(world):
    project = world.project()
    assert project.writer.identity().status == 418, "planted SHOULD departure"

@pytest.mark.requirement("AM-ART-1", clauses=("round-trip",))
def test_unclaimed_capability(world):
    raise AssertionError("never runs: artifacts are not claimed by the reference")

@pytest.mark.requirement("AM-CMD-1")
def test_setup_fails(world):
    project = world.project()
    setup_ok(project.writer.resource("custom.note", "absent"), "read a note that was never written")

@pytest.mark.requirement("AM-MBOX-4")
def test_tolerated(world):
    world.warn("tolerated upstream behaviour")

@pytest.mark.requirement("AM-CMD-2", clauses=("identical",))
def test_expected_failure(world):
    assert False, "known bug"

@pytest.mark.requirement("AM-CMD-3", clauses=("payload",))
def test_stale_baseline(world):
    pass
'''

BASELINE = '''
[[expected_failure]]
check = "test_checks.py::test_expected_failure"
reason = "issue 1"

[[expected_failure]]
requirement = "AM-CMD-3"
reason = "issue 2, fixed since"

[[expected_failure]]
check = "test_checks.py::test_renamed_long_ago"
reason = "issue 3"
'''


def _results(pytester):
    return {r["nodeid"].split("::")[-1]: r for r in
            json.loads((pytester.path / "aidememo-report" / "results.json").read_text())["records"]}


def test_idle_plugin_changes_nothing(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if "aidememo" in line and not line.startswith("plugins:")]
    assert not (pytester.path / "aidememo-report").exists()


def test_verdicts_follow_outcome_level_and_baseline(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    pytester.makefile(".toml", baseline=BASELINE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-baseline", "baseline.toml",
                                          "--aidememo-seed", "7")
    verdicts = {name: record["verdict"] for name, record in _results(pytester).items()}
    assert verdicts == {
        "test_pass": "PASS", "test_must_fails": "FAIL", "test_should_fails": "WARN",
        "test_unclaimed_capability": "SKIP", "test_setup_fails": "UNTESTABLE", "test_tolerated": "WARN",
        "test_expected_failure": "XFAIL", "test_stale_baseline": "XPASS",
    }
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*seed 7*", "*baseline entries naming no check of this run: "
                                 "test_checks.py::test_renamed_long_ago*", "*RESULT: a scored MUST does not hold*"])


def test_exit_is_zero_when_every_scored_must_holds(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k",
                                          "test_pass or test_should_fails or test_unclaimed or test_tolerated")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*RESULT: every scored MUST holds*"])


def test_failure_case_file_is_redacted_and_reproducible(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "test_must_fails", "--aidememo-seed", "11")
    record = _results(pytester)["test_must_fails"]
    html = (pytester.path / "aidememo-report" / "report.html").read_text()
    assert record["transcript"], "a failure carries its transcript"
    token = re.compile(r"tok-[0-9a-f]{32}")
    assert not token.search(json.dumps(record)) and not token.search(html), "a token leaked into a report"
    assert "Bearer &lt;redacted:writer&gt;" in html
    script = Path(record["script"]).read_text()
    assert "curl" in script and "Bearer {token.writer}" in script and record["replay"].startswith(
        "aidememo-conformance reproduce ")
    assert record["rerun"].endswith("--seed 11 test_checks.py::test_must_fails")
    assert "planted departure" in html and record["nodeid"] in html


def test_unknown_requirement_id_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad='import pytest\n@pytest.mark.requirement("AM-NOPE-9")\ndef test_x(world):\n    pass\n')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown requirement id 'AM-NOPE-9'*"])


@pytest.mark.parametrize(("marker", "message"), [
    ('"AM-CMD-3"', "AM-CMD-3 has clauses (payload, resource, precondition, actor, typed): name the ones*"),
    ('"AM-CMD-3", clauses=("payload", "colour")', "AM-CMD-3 has no clause 'colour'"),
    ('"AM-HEALTH-1", clauses=("status",)', "AM-HEALTH-1 has no clauses, so a check of it names none"),
], ids=["none-named", "unknown-clause", "atomic-requirement"])
def test_a_check_must_name_the_clauses_it_reads(pytester, marker, message):
    pytester.makepyfile(test_bad=f'import pytest\n@pytest.mark.requirement({marker})\ndef test_x(world):\n    pass\n')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_bad.py::test_x: {message}*"])


def test_a_parameter_adds_its_own_clauses(pytester):
    pytester.makepyfile(test_checks='''
import pytest
from conformance.marks import reads

@pytest.mark.requirement("AM-CMD-5")
@pytest.mark.parametrize("case", [pytest.param("a", marks=reads("AM-CMD-5", "stale"), id="a"),
                                  pytest.param("b", marks=reads("AM-CMD-5", "absent"), id="b")])
def test_cas(world, case):
    pass

@reads("AM-CMD-6", "tombstone")
def test_tombstone(world):
    pass
''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    records = _results(pytester)
    assert {name: tuple(r["clauses"]) for name, r in records.items()} == {
        "test_cas[a]": ("stale",), "test_cas[b]": ("absent",), "test_tombstone": ("tombstone",)}
    rows = {row["id"]: row for row in json.loads((pytester.path / "aidememo-report" / "traceability.json").read_text())}
    assert [(c["id"], c["status"]) for c in rows["AM-CMD-5"]["clauses"]] == [("stale", "tested"), ("absent", "tested")]
    assert rows["AM-CMD-6"]["status"] == "partly tested", rows["AM-CMD-6"]
    assert [(c["id"], c["checks"]) for c in rows["AM-CMD-6"]["clauses"]] == [
        ("tombstone", ["test_checks.py::test_tombstone"]), ("feed", [])]
    result.stdout.fnmatch_lines(["*MUST clauses no scored check read:*AM-CMD-6:feed*"])


def test_list_shows_which_check_reads_which_clause(pytester):
    pytester.makepyfile(test_checks='''
import pytest
from conformance.marks import reads

@reads("AM-CMD-6", "tombstone")
def test_tombstone(world):
    pass
''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-list")
    result.stdout.fnmatch_lines(["*[[]tombstone[]] a delete leaves a tombstone*", "*- test_tombstone",
                                 "*[[]feed[]] the delete appears in the change feed*NO CHECK READS THIS*",
                                 "*clauses no check reads: AM-HEALTH-1, *AM-CMD-6:feed*"])


def test_bad_target_value_is_a_usage_error(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-url", "not-a-url")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aidememo-url: expected an http:// or https:// URL*"])


def test_list_runs_nothing(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-list")
    result.stdout.fnmatch_lines(["*AM-HEALTH-1*MUST*core*1*", "*test_pass*", "*untested MUSTs:*"])
    assert not (pytester.path / "aidememo-report").exists()


def test_xdist_workers_share_one_seed_and_one_report(pytester, monkeypatch):
    pytester.makepyfile(test_checks=CHECKS)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # unrelated plugins only slow the workers down
    result = pytester.runpytest_subprocess("-p", "conformance.plugin", "-p", "xdist.plugin", "-p", "no:cacheprovider",
                                           "-n", "2", "-k", "test_pass or test_must_fails", "--aidememo-seed", "5")
    records = _results(pytester)
    assert {name: r["verdict"] for name, r in records.items()} == {"test_pass": "PASS", "test_must_fails": "FAIL"}
    assert {r["seed"] for r in records.values()} == {5}
    assert result.ret == pytest.ExitCode.TESTS_FAILED


HOOK_CONFTEST = '''
import tempfile
from pathlib import Path

import aidememo_ref
from aidememo_ref import serve_in_thread

_served = {}


def pytest_configure(config):
    workdir = tempfile.mkdtemp()
    ledger = aidememo_ref.ReferenceLedger(str(Path(workdir) / "l.sqlite"))
    server = serve_in_thread(ledger)
    config.option.aidememo_url = server.__enter__()
    _served.update(ledger=ledger, server=server, calls=[])


def pytest_unconfigure(config):
    _served["server"].__exit__(None, None, None)
    _served["ledger"].close()


def pytest_aidememo_provision(config, tenant, project, actor, role, token):
    _served["calls"].append(role)
    _served["ledger"].provision(tenant_id=tenant, project_id=project, actor_id=actor, token=token, role=role)
    return True
'''


def test_a_conftest_can_provision_through_the_hook(pytester):
    pytester.makeconftest(HOOK_CONFTEST)
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "test_pass or test_must_fails")
    verdicts = {name: record["verdict"] for name, record in _results(pytester).items()}
    assert verdicts == {"test_pass": "PASS", "test_must_fails": "FAIL"}
    result.stdout.fnmatch_lines(["*(provision hook: *"])
