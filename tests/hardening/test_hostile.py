"""The kit against servers that hang, reset, trickle, babble or flood: bounded, attributed, no crash.

``tests/suite/test_hostile.py`` covers the conformance suite against hang, reset, garbage,
non-JSON, empty-object and unbounded-flood servers; this file adds the behaviours it does not
(a byte-at-a-time trickle, JSON of the wrong shapes, a flood that announces 16 GiB) and points
the simulator at all of them. Each run gets a subprocess deadline: a hang is a failure, never a
stuck CI job. Known defects of the tools are ``xfail`` with the missing piece named; they turn
into XPASS once fixed (the suite's trickle deadline and the simulator's one-line transport
errors started that way).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.sim.served import bootstrap_command, served_file
from tests.targetfile import token_entry, write_target

from .hostile import REWRITES, TRICKLE_INTERVAL_S, hostile_proxy, hostile_server

# Far above what a bounded run needs (a breaker-tripped suite finishes in ~15 s at timeout_s=1),
# far below "hung": only the deadline of the subprocess, not a performance figure.
CONFORMANCE_DEADLINE_S = 40
SIM_DEADLINE_S = 40

TOKENS = [token_entry("hostile", f"w{i}", token=f"hostile-token-{i}") for i in (1, 2)]

# A reason that is a bare Python exception (or a traceback) means the kit broke, not the target;
# a sentence blaming the answer may quote the exception it caught.
KIT_FAULT = re.compile(r"^\s*\w*(Error|Exception)\b|Traceback")


def _run(argv: list[str], deadline: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=deadline)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv[:3])} did not finish within {deadline} s: the tool hung on a hostile server")


@pytest.mark.parametrize("behaviour", ["hang", "reset", "garbage", "junk-json", "trickle", "wrong-shapes", "gigantic"])
def test_conformance_run_is_bounded_and_blames_the_target(tmp_path: Path, behaviour: str) -> None:
    report = tmp_path / "report"
    with hostile_server(behaviour) as url:
        config = write_target(tmp_path / "target.toml", url, TOKENS, timeout_s=1)
        done = _run(["-m", "conformance.cli", "run", "--config", str(config), "--report-dir", str(report),
                     "--seed", "5"], CONFORMANCE_DEADLINE_S)
    assert done.returncode == 1, f"exit {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    assert "Traceback" not in done.stderr
    results = json.loads((report / "results.json").read_text())
    assert results["ok"] is False and results["counts"]["PASS"] == 0
    assert results["counts"].get("ERROR", 0) == 0
    failed = [r for r in results["records"] if r["verdict"] == "FAIL"]
    assert failed
    for record in failed:
        assert KIT_FAULT.search(record["reason"]) is None, record["reason"]
        assert record["rerun"].startswith("aidememo-conformance run"), record
    assert {r["verdict"] for r in results["records"]} <= {"FAIL", "WARN", "UNTESTABLE", "SKIP"}
    health = next(r for r in results["records"] if r["requirement"] == "AM-HEALTH-1")
    assert health["verdict"] == "FAIL" and health["transcript"], health  # the failure carries its evidence
    assert "report.html" in done.stdout and (report / "report.html").exists()


@pytest.mark.parametrize("behaviour", [
    "hang",
    "reset",
    "garbage",
    "junk-json",
    "wrong-shapes",
    "gigantic",
    "trickle",
])
def test_simulator_run_is_bounded_and_says_why_in_one_line(tmp_path: Path, behaviour: str) -> None:
    with hostile_server(behaviour) as url:
        config = write_target(tmp_path / "target.toml", url, TOKENS, timeout_s=1)
        done = _run(["-m", "simulations.cli", "run", "--config", str(config), "--budget", "3", "--seed", "5",
                     "--out", str(tmp_path / "out")], SIM_DEADLINE_S)
    assert done.returncode != 0, done.stdout[-1500:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    assert last.startswith("aidememo-sim:"), done.stderr[-1500:]
    assert "replay this run with:" in done.stdout


@pytest.mark.parametrize("behaviour", ["hang", "reset", "trickle", "garbage", "junk-json", "wrong-shapes", "gigantic"])
def test_hostile_servers_misbehave_as_described(behaviour: str) -> None:
    # The servers themselves must be hostile in the way their names say, or the tests above prove nothing.
    import httpx

    with hostile_server(behaviour) as url:
        if behaviour == "trickle":
            # Every read returns within the timeout, yet a second brings only a few bytes.
            host, _, port = url.removeprefix("http://").rpartition(":")
            # A generous socket timeout: on a loaded machine one byte may take longer than the
            # trickle interval; the bound below follows the time that really passed.
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
                got, started = b"", time.monotonic()
                while time.monotonic() - started < 1:
                    got += sock.recv(100)
                elapsed = time.monotonic() - started
            most = int(elapsed / TRICKLE_INTERVAL_S) + 2
            assert 0 < len(got) <= most and b"HTTP/1.1 200 OK".startswith(got), (got, elapsed)
            return
        try:
            with httpx.Client(timeout=httpx.Timeout(1.0)) as http, http.stream("GET", f"{url}/health") as response:
                first = next(response.iter_raw(), b"")
                outcome = (response.status_code, response.headers.get("content-length"), first)
        except httpx.HTTPError as exc:
            outcome = (type(exc).__name__,)
    expected = {
        "hang": lambda o: o == ("ReadTimeout",),
        "reset": lambda o: o[0] in ("ReadError", "RemoteProtocolError"),
        "garbage": lambda o: o[0] == "RemoteProtocolError",
        "junk-json": lambda o: o[0] == 200 and o[2].startswith(b'{"command_id"'),
        "wrong-shapes": lambda o: isinstance(o[0], int),
        "gigantic": lambda o: o[0] == 200 and o[1] == str(16 << 30),
    }[behaviour]
    assert expected(outcome), outcome


# -- a working server whose answers are bent ------------------------------------------------------
#
# Deep nesting, wrong types, 1 MB bodies, invalid UTF-8 and CR or LF inside a header, each in front
# of a reference that provisions and answers for real, so every tool gets past its setup and meets
# the bent answers where it judges them: each gives verdicts and reports, never a traceback.

BENT_DEADLINE_S = 240  # a subprocess deadline only: far above a bounded run on a loaded machine


@contextmanager
def _bent(tmp_path: Path, rewrite: str) -> Iterator[Path]:
    """The reference on a file database behind ``hostile_proxy``; yields a target file naming the proxy."""
    config = tmp_path / "target.toml"
    database = tmp_path / "ref.sqlite"
    with served_file(database, config) as url, hostile_proxy(url, rewrite) as bent:
        write_target(config, bent, timeout_s=10, provision={"command": bootstrap_command(database)})
        yield config


def _no_crash(done: subprocess.CompletedProcess[str], codes: tuple[int, ...]) -> None:
    assert done.returncode in codes, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_conformance_run_judges_bent_answers(tmp_path: Path, rewrite: str) -> None:
    report = tmp_path / "report"
    with _bent(tmp_path, rewrite) as config:
        done = _run(["-m", "conformance.cli", "run", "--config", str(config), "--report-dir", str(report),
                     "--seed", "5", "test_handoff.py", "test_wire.py"], BENT_DEADLINE_S)
    _no_crash(done, (0, 1))
    results = json.loads((report / "results.json").read_text())
    assert results["counts"].get("ERROR", 0) == 0, [r["reason"] for r in results["records"] if r["verdict"] == "ERROR"]
    for record in results["records"]:
        assert KIT_FAULT.search(record.get("reason") or "") is None, record["reason"]


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_diff_reports_bent_answers_as_divergences(tmp_path: Path, rewrite: str) -> None:
    report = tmp_path / "report"
    with _bent(tmp_path, rewrite) as config:
        done = _run(["-m", "conformance.cli", "diff", "--config", str(config), "--report-dir", str(report),
                     "--seed", "3", "--steps", "40", "--budget", "60"], BENT_DEADLINE_S)
    # A header split by a bare LF is two well-formed headers, diff compares neither: no divergence.
    _no_crash(done, (0, 1) if rewrite == "lf-header" else (1,))
    summary = json.loads((report / "diff.json").read_text())
    assert (report / "diff.html").exists() and (summary["divergences"] or rewrite == "lf-header")


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_simulator_run_and_clients_survive_bent_answers(tmp_path: Path, rewrite: str) -> None:
    with _bent(tmp_path, rewrite) as config:
        runs = [_run(["-m", "simulations.cli", *words, "--config", str(config), "--seed", "5", "--budget", "10",
                      "--out", str(tmp_path / "out")], BENT_DEADLINE_S)
                for words in (["run", "--batches", "3"], ["clients", "--rounds", "2"])]
    for done in runs:
        _no_crash(done, (0, 1, 2, 3))
        if done.returncode == 2:  # the server's answers left nothing to race: one line that says so
            assert done.stderr.strip().splitlines()[-1].startswith("aidememo-sim:"), done.stderr[-2000:]
