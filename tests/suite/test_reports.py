"""What a run reports, seen as an implementer's CI and terminal see it (issue 20, items 4, 5, 6, 8):
junit.xml valid against the JUnit schema dashboards read, with verdict properties and visible
WARNs; baselines that tell an expected warning from a stale entry, and a command that writes
one; reasons shown whole; the failing step marked beside what was expected of it."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from conformance.cli import main
from conformance.profiles.aidememo import PROFILE
from conformance.reports.baseline import load_baseline

pytest_plugins = ["pytester"]

SCHEMA = Path(__file__).with_name("junit.xsd")
LONG = "x" * 140  # pushes the telling part of a reason past a terminal line's width

CHECKS = f'''
import pytest
from conformance.profiles.aidememo.expect import expect_error, expect_status

@pytest.mark.requirement("AM-HEALTH-1")
def test_pass(world):
    expect_status(world.runtime.wire.request(world.transcript, "GET", "/health"), 200)

@pytest.mark.requirement("AM-ID-1")
def test_must_fails(world):
    project = world.project()
    expect_status(project.writer.identity(), 200)
    expect_error(project.writer.identity(), 403, "project_forbidden")

@pytest.mark.requirement("AM-ID-1")
def test_long_reason(world):
    assert False, "{LONG} the server answered 200 where 409 stale_revision was due"

@pytest.mark.requirement("AM-ART-1", clauses=("round-trip",))
def test_unclaimed(world):
    raise AssertionError("never runs: artifacts are not claimed by the reference")

@pytest.mark.requirement("AM-MBOX-4")
def test_tolerated(world):
    world.warn("upstream answers 500 storage_failure for before_seq above 2^63-1")

@pytest.mark.requirement("AM-MBOX-4")
def test_tolerated_and_listed_as_failure(world):
    world.warn("a tolerated departure the baseline lists as a failure")

@pytest.mark.requirement("AM-CMD-2", clauses=("identical",))
def test_expected_failure(world):
    assert False, "known bug"

@pytest.mark.requirement("AM-CMD-3", clauses=("payload",))
def test_fixed_since(world):
    pass

@pytest.mark.requirement("AM-CMD-4", clauses=("kind",))
def test_warning_gone(world):
    pass
'''

BASELINE = '''
[[expected_failure]]
check = "test_checks.py::test_expected_failure"
reason = "issue 1"

[[expected_failure]]
check = "test_checks.py::test_tolerated_and_listed_as_failure"
reason = "issue 2"

[[expected_failure]]
requirement = "AM-CMD-3"
reason = "issue 3, fixed since"

[[expected_warning]]
check = "test_checks.py::test_tolerated"
reason = "upstream's 500 (ERRATA 4)"

[[expected_warning]]
check = "test_checks.py::test_warning_gone"
reason = "warned once"
'''


def _results(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "aidememo-report" / "results.json").read_text())


def _records(pytester: pytest.Pytester) -> dict[str, dict]:
    return {r["nodeid"].rsplit("::", 1)[-1]: r for r in _results(pytester)["records"]}


@pytest.fixture
def baselined(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makepyfile(test_checks=CHECKS)
    pytester.makefile(".toml", baseline=BASELINE)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-baseline", "baseline.toml",
                                        "--aidememo-seed", "9")


def test_junit_validates_and_carries_every_verdict_where_dashboards_show_it(pytester, baselined):
    path = pytester.path / "aidememo-report" / "junit.xml"
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(path))
    cases = {case.get("name"): case for case in ET.parse(path).getroot().iter("testcase")}
    records = _records(pytester)
    assert cases.keys() == records.keys()
    for name, case in cases.items():
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        record = records[name]
        assert (props["requirement"], props["level"], props["verdict"]) == (
            record["requirement"], record["level"], record["verdict"]), name
    warned = cases["test_tolerated"].find("skipped")
    assert warned is not None and warned.get("type") == "conformance.WARN", "a WARN must not look like a pass"
    assert "WARN AM-MBOX-4 (SHOULD): upstream answers 500" in warned.get("message", "")
    assert cases["test_must_fails"].find("failure").get("type") == "conformance.FAIL"
    assert cases["test_unclaimed"].find("skipped").get("type") == "conformance.SKIP"
    assert cases["test_pass"].find("failure") is None and cases["test_pass"].find("skipped") is None
    failed = cases["test_must_fails"]
    assert "rerun: aidememo-conformance run" in failed.find("system-out").text
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("failures") == str(sum(r["verdict"] in ("FAIL", "UNTESTABLE", "UNKNOWN", "XPASS")
                                            for r in records.values()))


def test_a_schema_violation_is_caught(tmp_path):
    # The schema bites: a case without its classname, or with two outcomes, is refused.
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="s" tests="1" failures="0" errors="0">'
                   '<testcase name="t"><failure/><skipped/></testcase></testsuite></testsuites>')
    assert not xmlschema.XMLSchema(str(SCHEMA)).is_valid(str(bad))


def test_baselines_tell_expected_warnings_from_stale_entries(pytester, baselined):
    records = _records(pytester)
    verdicts = {name: r["verdict"] for name, r in records.items()}
    assert verdicts["test_tolerated"] == "WARN" and records["test_tolerated"]["baseline"] == "upstream's 500 (ERRATA 4)"
    assert verdicts["test_tolerated_and_listed_as_failure"] == "WARN", "a baselined WARN never reads XPASS"
    assert verdicts["test_expected_failure"] == "XFAIL"
    assert verdicts["test_fixed_since"] == "XPASS" and records["test_fixed_since"]["reason"].startswith(
        "stale baseline entry: the check passes, the baseline expects a failure (issue 3, fixed since)")
    assert verdicts["test_warning_gone"] == "PASS", "a warning that went away does not fail the run"
    results = _results(pytester)
    assert results["stale_baseline"] == ["AM-CMD-3 (expected_failure)", "test_checks.py::test_warning_gone "
                                         "(expected_warning)"]
    baselined.stdout.fnmatch_lines(["*stale baseline entries (their checks pass now: remove them): AM-CMD-3*",
                                    "*WARN*AM-MBOX-4*test_tolerated (expected by the baseline)*"])


def test_a_run_failing_only_by_a_stale_entry_says_so(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    pytester.makefile(".toml", baseline=BASELINE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-baseline", "baseline.toml",
                                          "-k", "test_pass or test_fixed_since or test_tolerated")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*XPASS*AM-CMD-3*test_fixed_since*", "*stale baseline entry*",
                                 "RESULT: stale baseline entries (XPASS)*remove the entries"])
    assert "a scored MUST does not hold" not in result.stdout.str()


def test_baseline_write_lists_every_departure_and_a_run_with_it_expects_them(pytester, tmp_path):
    pytester.makepyfile(test_checks=CHECKS)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-seed", "9")
    first = _records(pytester)
    out = tmp_path / "baseline.toml"
    assert main(["baseline", "write", str(pytester.path / "aidememo-report" / "results.json"), "-o", str(out)]) == 0
    baseline = load_baseline(str(out), PROFILE.registry())
    kinds = {e.check: e.kind for e in baseline.entries}
    assert kinds == {"test_checks.py::test_must_fails": "failure", "test_checks.py::test_long_reason": "failure",
                     "test_checks.py::test_tolerated": "warning",
                     "test_checks.py::test_tolerated_and_listed_as_failure": "warning",
                     "test_checks.py::test_expected_failure": "failure"}
    reasons = {e.check: e.reason for e in baseline.entries}
    assert reasons["test_checks.py::test_must_fails"] == first["test_must_fails"]["reason"], "reasons carry over"
    again = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-baseline", str(out))
    verdicts = {name: r["verdict"] for name, r in _records(pytester).items()}
    assert verdicts["test_must_fails"] == verdicts["test_long_reason"] == "XFAIL"
    assert _records(pytester)["test_tolerated"]["baseline"], "an expected warning reads as such"
    assert again.ret == pytest.ExitCode.OK


def test_baseline_write_refuses_what_is_not_a_results_file(tmp_path, capsys):
    (tmp_path / "x.json").write_text('{"records": 3}')
    assert main(["baseline", "write", str(tmp_path / "x.json")]) == 2
    assert main(["baseline", "write", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "not a run's results.json" in err[0] and "missing.json" in err[1], err


def test_the_terminal_shows_reasons_whole_and_names_warnings(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "long_reason or tolerated or must_fails")
    text = result.stdout.str()
    summary = text[text.index("===== AideMemo conformance"):text.index("RESULT: ")]
    joined = " ".join(line.strip() for line in summary.splitlines())
    assert f"{LONG} the server answered 200 where 409 stale_revision was due" in joined, "a reason is never cut"
    reasons = [line for line in summary.splitlines() if line.startswith(" " * 13)]
    assert reasons and all(len(line) <= 100 or " " not in line.strip() for line in reasons), "wrapped, not cut"
    assert re.search(r"WARN\s+AM-MBOX-4\s+test_checks.py::test_tolerated\n", summary), "WARN checks are named"


def test_the_case_file_marks_the_failing_step_beside_what_was_expected(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "must_fails")
    record = _records(pytester)["test_must_fails"]
    assert record["failed_step"] == 1 and record["expected"] == "HTTP 403 project_forbidden"
    assert [e["expected"] for e in record["transcript"]] == ["HTTP 200", "HTTP 403 project_forbidden"]
    html = (pytester.path / "aidememo-report" / "report.html").read_text()
    case = html[html.index("test_must_fails</h3>"):]
    assert "the check failed here" in case and "<td>HTTP 403 project_forbidden</td><td>HTTP 200</td>" in case
    assert "expected HTTP 403 project_forbidden; GET" in case, "the Why text"


def test_a_one_check_rerun_lists_no_untested_musts(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "test_pass")
    result.stdout.fnmatch_lines(["untested MUSTs (no check exists): none",
                                 "MUSTs whose checks this run did not select: * (traceability.json lists them)"])
    assert "(command:" not in result.stdout.str() and "(embedded: the reference started" in result.stdout.str()


def test_a_claimed_capability_whose_checks_were_all_skipped_says_so(pytester):
    # As against a server whose artifact store answers 503 unavailable: claimed, yet not scored.
    pytester.makepyfile(test_art='''
import pytest
from conformance.errors import NotScored

@pytest.mark.requirement("AM-ART-1", clauses=("round-trip",))
def test_store(world):
    raise NotScored("the artifact store answered 503 artifact_store_unavailable")
''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-capability", "artifacts")
    text = " ".join(result.stdout.str().split())
    assert "artifacts claimed but not scored (its checks were skipped)" in text
    assert "not scored MUSTs (capability unclaimed or identities unavailable): AM-ART-1" in text
