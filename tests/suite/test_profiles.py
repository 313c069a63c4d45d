"""Profiles are plug-ins: a toy profile whose target is a command line (no URL) runs through the
shared plugin, verdicts, reports, capability claims and command line exactly as AideMemo does."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import installed
from conformance.cli import main

pytest_plugins = ["pytester"]

TOY = Path(__file__).with_name("toy")
BROKEN = shlex.join([sys.executable, str(TOY / "toy_cli.py"), "--broken"])
TOKEN = re.compile(r"toy-[0-9a-f]{16}")


@pytest.fixture
def toy(monkeypatch, pytester):
    monkeypatch.setitem(installed.PROFILES, "toy", "tests.suite.toy:PROFILE")
    pytester.makepyfile(test_toy=(TOY / "checks" / "test_toy.py").read_text())


def _results(directory: Path) -> dict:
    return json.loads((directory / "aidememo-report" / "results.json").read_text())


def _verdicts(results: dict) -> dict[str, str]:
    return {r["nodeid"].rsplit("::", 1)[-1]: r["verdict"] for r in results["records"]}


def test_a_command_line_profile_runs_through_the_shared_suite(pytester, toy):
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "toy", "--aidememo-seed", "3")
    results = _results(pytester.path)
    assert _verdicts(results) == {"test_echo_prints_its_words": "PASS", "test_an_unknown_token_is_refused": "PASS",
                                  "test_shout_prints_upper_case": "PASS"}
    assert (results["profile"], results["target"], results["mode"], results["requests"]) == (
        "toy", "embedded toy CLI", "command line", 3)
    assert results["capabilities"]["shout"].startswith("claimed, detected: probe 'shout probe' exited 0")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*profile toy, target embedded toy CLI (command line), seed 3*",
                                 "*Toy conformance (profile toy)*", "*RESULT: every scored MUST holds*"])
    assert "<title>Toy conformance report</title>" in (pytester.path / "aidememo-report" / "report.html").read_text()


def test_a_broken_cli_fails_by_the_right_requirements_and_leaks_no_token(pytester, toy):
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "toy", "--aidememo-cli",
                                          BROKEN, "--aidememo-seed", "3")
    results = _results(pytester.path)
    assert _verdicts(results) == {"test_echo_prints_its_words": "FAIL", "test_an_unknown_token_is_refused": "FAIL",
                                  "test_shout_prints_upper_case": "PASS"}
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    echo = next(r for r in results["records"] if r["requirement"] == "TOY-1")
    assert echo["transcript"][0]["kind"] == "command" and echo["transcript"][0]["argv"][-2] == "echo"
    # The toy's checks judge with plain asserts and state no expected status or exit code, and the
    # toy profile has no reference to pin one: replayed, every answer would hold, so each script
    # says it cannot tell and exits 2, never 0 while the bug shows (the broken CLI).
    for record in results["records"]:
        if record["verdict"] == "FAIL":
            done = subprocess.run(["sh", record["script"]], capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "CLI": BROKEN})
            assert done.returncode == 2 and "judged more than a status or exit code" in done.stdout, done.stdout
    assert echo["rerun"].startswith(f"aidememo-conformance run --profile toy --cli {shlex.quote(BROKEN)} ")
    refused = next(r for r in results["records"] if r["requirement"] == "TOY-2")
    assert "unknown token '<redacted:stranger>'" in refused["transcript"][0]["stderr"], "echoed token not redacted"
    for name in ("results.json", "report.html"):
        text = (pytester.path / "aidememo-report" / name).read_text()
        assert not TOKEN.search(text), f"a token leaked into {name}"


def test_an_unclaimed_capability_of_a_profile_is_not_scored(pytester, toy):
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "toy", "--aidememo-capability=-shout")
    results = _results(pytester.path)
    assert _verdicts(results)["test_shout_prints_upper_case"] == "SKIP"
    assert results["capabilities"]["shout"] == "not claimed, declared absent"


def test_checks_of_another_profile_are_deselected_and_unknown_ids_refused(pytester, toy):
    pytester.makepyfile(test_other='import pytest\n@pytest.mark.requirement("AM-HEALTH-1")\n'
                                   'def test_am(world):\n    raise AssertionError("never runs under the toy profile")\n')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "toy")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*3 passed, 1 deselected*"])
    pytester.makepyfile(test_other='import pytest\n@pytest.mark.requirement("ZZ-1")\ndef test_zz(world):\n    pass\n')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "toy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown requirement id 'ZZ-1' (profile toy)*"])


def test_the_command_line_takes_the_profile_and_only_its_flags(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # main sets it; restore it afterwards
    assert main(["run", "--profile", "toy", "--cli", BROKEN, "--seed", "4"]) == 1
    assert {r["verdict"] for r in _results(tmp_path)["records"]} == {"FAIL", "PASS"}
    capsys.readouterr()
    assert main(["run", "--profile", "toy", "--url", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err.strip() == "aidememo-conformance: unrecognized arguments: --url (profile toy)"
    (tmp_path / "toy.toml").write_text('profile = "toy"\ntimeout_s = 5\n')
    assert main(["run", "--config", "toy.toml", "--seed", "4"]) == 0, "the target file's profile key selects it"
    assert main(["requirements", "--profile", "toy"]) == 0
    listing = capsys.readouterr().out
    assert "TOY-1" in listing and "[seed]" in listing and "AM-HO-1" not in listing
