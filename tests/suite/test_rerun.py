"""The implementer's loop (issue 20): every command the kit prints, run twice against a server that
keeps its database, gives the verdict it gave the first time, and the fixed server passes it.

The server is the reference on a SQLite file served over HTTP (a planted bug from the kill
matrix, then the unbroken reference on the same file and port), provisioned by its bootstrap
command template, as an implementer's own server would be.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import aidememo_ref
from aidememo_ref import serve_in_thread
from tests.suite import mutants
from tests.targetfile import token_entry, write_target

SEED = "4242"
CHECK = "test_handoff.py::test_accept_with_a_stale_revision_is_refused"
TEMPLATE = ("aidememo-ref bootstrap --database {database} --tenant-id {{tenant}} --project-id {{project}} "
            "--actor-id {{actor}} --token-file {{token_file}} --role {{role}}")


def _env() -> dict[str, str]:
    # The printed commands name the console scripts; make sure the ones of this interpreter are found.
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextmanager
def kept(database: Path, factory: Callable[[str], Any], port: int = 0) -> Iterator[str]:
    """``factory``'s ledger on ``database``, served over HTTP; the file outlives it."""
    ledger = factory(str(database))
    try:
        with serve_in_thread(ledger, port=port) as url:
            yield url
    finally:
        ledger.close()


def reference(db_path: str) -> Any:
    return aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)


def run(words: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    """Run a command line as a user types it; the run's records by check name."""
    done = subprocess.run(words, capture_output=True, text=True, timeout=300, env=_env(), cwd=cwd)
    results = cwd / "aidememo-report" / "results.json"
    assert results.exists(), f"{shlex.join(words)}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    data = json.loads(results.read_text())
    records = {r["nodeid"].rsplit("/", 1)[-1]: {**r, "run_tag": data["run_tag"]} for r in data["records"]}
    results.replace(results.with_suffix(".json.last"))  # the next run must write its own
    return done, records


def printed_rerun(stdout: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if line.startswith("rerun one: "))
    return shlex.split(line.removeprefix("rerun one: "))


def same(record: dict[str, Any]) -> tuple[str, str]:
    """A verdict and its reason with the run's namespace (a new one every run) taken out, up to the
    answer's body (whose fingerprint and commit time differ in a new namespace)."""
    reason = record["reason"].replace(record["run_tag"], "RUN")
    return record["verdict"], re.sub(r"answered (\d+): .*", r"answered \1", reason, flags=re.S)


def test_a_printed_rerun_repeats_its_failure_and_passes_once_the_server_is_fixed(tmp_path):
    database = tmp_path / "ledger.sqlite"
    target = tmp_path / "target.toml"
    with kept(database, mutants.cas_ignored) as url:
        write_target(target, url, provision={"command": TEMPLATE.format(database=database)})
        first, records = run(["aidememo-conformance", "run", "--config", "target.toml", "--seed", SEED,
                              "--requirement", "AM-HO-1"], tmp_path)
        assert records[CHECK]["verdict"] == "FAIL", records[CHECK]
        rerun = printed_rerun(first.stdout)
        assert rerun[-1] in {name for name, r in records.items() if r["verdict"] == "FAIL"}
        again = [run(rerun, tmp_path)[1][rerun[-1]] for _ in range(2)]
        assert same(again[0]) == same(again[1]) == same(records[rerun[-1]]), again
        tags = {records[CHECK]["run_tag"], again[0]["run_tag"], again[1]["run_tag"]}
        assert len(tags) == 3, "every run provisions in a namespace of its own"
        port = int(url.rsplit(":", 1)[1])
    with kept(database, reference, port):  # the fixed server, on the same file and port
        fixed = [run(rerun, tmp_path)[1][rerun[-1]] for _ in range(2)]
    assert [r["verdict"] for r in fixed] == ["PASS", "PASS"], fixed


def test_a_rerun_with_fixed_tokens_sends_its_requests_under_new_ids(tmp_path):
    # One shared project: only new ids keep a rerun from meeting the stored receipts of the last run.
    database = tmp_path / "ledger.sqlite"
    tokens = []
    for actor in ("w1", "w2"):
        token_file = tmp_path / f"{actor}.token"
        token_file.write_text(f"fixed-{actor}-token-0123456789\n")
        token_file.chmod(0o600)
        aidememo_ref.provision(str(database), tenant_id="acme", project_id="shared", actor_id=actor,
                               token=token_file.read_text().strip(), role="writer")
        tokens.append(token_entry("shared", actor, token_file=token_file.name))
    words = ["aidememo-conformance", "run", "--config", "target.toml", "--seed", SEED, CHECK]
    with kept(database, mutants.cas_ignored) as url:
        write_target(tmp_path / "target.toml", url, tokens)
        broken = [run(words, tmp_path)[1][CHECK] for _ in range(2)]
        port = int(url.rsplit(":", 1)[1])
    assert same(broken[0]) == same(broken[1]) and broken[0]["verdict"] == "FAIL", broken
    with kept(database, reference, port):
        fixed = [run(words, tmp_path)[1][CHECK]["verdict"] for _ in range(2)]
    assert fixed == ["PASS", "PASS"], "the fixed server must not be judged by the receipts of the broken one"


def test_the_rerun_command_names_no_run_tag(tmp_path):
    with kept(tmp_path / "ledger.sqlite", mutants.cas_ignored) as url:
        write_target(tmp_path / "target.toml", url,
                     provision={"command": TEMPLATE.format(database=tmp_path / "ledger.sqlite")})
        done, _ = run(["aidememo-conformance", "run", "--config", "target.toml", "--seed", SEED, "--run-tag",
                       "exact1", CHECK], tmp_path)
    assert "run tag exact1" in done.stdout
    assert not re.search(r"--run-tag", " ".join(printed_rerun(done.stdout))), "a rerun gets a namespace of its own"


def echoing(db_path: str) -> Any:
    """cas_ignored that also echoes the request's Authorization header in every answer."""
    ledger = mutants.cas_ignored(db_path)
    original = ledger.service.handle

    def handle(method: str, target: Any, headers: Any, body: bytes = b"", **options: Any) -> Any:
        response = original(method, target, headers, body, **options)
        auth = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        return dataclasses.replace(response, headers=[*response.headers, ("x-echo", auth.decode("latin-1"))])

    ledger.service.handle = handle
    return ledger


TOKEN = re.compile(r"tok-[0-9a-f]{32}")


def test_the_case_file_script_replays_twice_says_what_was_expected_and_shows_no_token(tmp_path):
    database = tmp_path / "ledger.sqlite"
    elsewhere = tmp_path / "elsewhere"  # the script runs the bootstrap in the run's directory, from anywhere
    elsewhere.mkdir()
    with kept(database, echoing) as url:
        write_target(tmp_path / "target.toml", url, provision={"command": TEMPLATE.format(database="ledger.sqlite")})
        run(["aidememo-conformance", "run", "--config", "target.toml", "--seed", SEED, CHECK], tmp_path)
        script = _script_of(tmp_path / "aidememo-report", CHECK)
        port = int(url.rsplit(":", 1)[1])
        assert "set -x" not in script.read_text() and not TOKEN.search(script.read_text())
        outputs = [subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120, cwd=elsewhere,
                                  env=_env()) for _ in range(2)]
    for done in outputs:
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr
        failing = done.stdout[done.stdout.index("--- step3: "):]
        assert "expected: HTTP 409 stale_revision" in failing.splitlines()[0]
        assert "THE BUG SHOWS: step3: HTTP 200, not 409" in failing, "the planted bug's answer, against the expected"
        assert not TOKEN.search(done.stdout + done.stderr), "no token on the terminal"
    with kept(database, reference, port):
        fixed = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120, cwd=elsewhere,
                               env=_env())
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr
    assert "step3 answered HTTP 409" in fixed.stdout, "the fixed server refuses"


def _script_of(report: Path, check: str) -> Path:
    records = json.loads((report / "results.json.last").read_text())["records"]
    return Path(next(r["script"] for r in records if r["nodeid"].endswith(check)))
