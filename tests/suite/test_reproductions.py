"""Reproductions reproduce (issue 35): against a served reference that keeps its data, every failing
case's printed rerun fails again alone, and its script exits 1 against the planted bug and 0 against
the correct reference, twice each; the same for a ``diff`` divergence's script, its record's
``aidememo-conformance reproduce`` and the diff's own ``--replay``.

The server is one SQLite file served over HTTP by a process of its own (a kill-matrix variant of
``mutants.py``, then the unbroken reference on the same file and port), provisioned by its bootstrap
command template, as an implementer's server would be. A process per server, because several
variants patch the reference's modules.

Variants, one per kind of reproduction (all of them would take over ten minutes):

* ``cas_ignored``: a step answers 200 where 409 stale_revision is due (a helper's stated expectation);
* ``cursor_stuck``: feed paging, whose steps need the project's epoch and cursors bound from earlier
  answers (copied, they answer 409 cursor_epoch_mismatch on a rerun), judged by the reference's answers;
* ``visibility_leak``: listings that show too much, a whole-answer judgement of the check's;
* ``double_accept``: a race (requests sent at once behind a barrier), whose script says it cannot force
  the interleaving and exits 3 against the correct reference.

The simulator's replay, pytest file and curl script are held to the same loop by
``tests/sim/test_loop.py`` (a planted bug on a served reference that keeps its database).

The five tests took 455 s together under a load average of about 15 on two cores (the divergence
130 s, a variant 50 to 120 s): every script and replay provisions through ``aidememo-ref bootstrap``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.targetfile import write_target

HERE = Path(__file__).parent
TEMPLATE = ("aidememo-ref bootstrap --database {database} --tenant-id {{tenant}} --project-id {{project}} "
            "--actor-id {{actor}} --token-file {{token_file}} --role {{role}}")
# name -> the requirements whose checks meet it
VARIANTS = {"cas_ignored": ("AM-HO-1",), "cursor_stuck": ("AM-FEED-3",), "visibility_leak": ("AM-VIS-1",),
            "double_accept": ("AM-HL-CAS-3",)}
MOST_CASES = 2  # failing cases checked per variant (the first ones, by requirement and node id)
_SERVE = """
import sys
sys.path.insert(0, {here!r})
import aidememo_ref, mutants
from aidememo_ref import serve_in_thread
name, database, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
ledger = (aidememo_ref.ReferenceLedger(database, clock=aidememo_ref.OffsetClock(), test_clock=True)
          if name == "reference" else getattr(mutants, name)(database))
with serve_in_thread(ledger, port=port) as url:
    print(url, flush=True)
    sys.stdin.read()
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextmanager
def served(name: str, database: Path, port: int = 0) -> Iterator[str]:
    """``name``'s ledger (a variant, or ``reference``) on ``database``, served by a process of its own."""
    child = subprocess.Popen([sys.executable, "-c", _SERVE.format(here=str(HERE)), name, str(database), str(port)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        assert url.startswith("http://"), f"{name} did not start"
        yield url
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def _run(words: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(words, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=cwd)


def _records(cwd: Path) -> dict[str, dict[str, Any]]:
    results = cwd / "aidememo-report" / "results.json"
    records = {r["nodeid"].rsplit("/", 1)[-1]: r for r in json.loads(results.read_text())["records"]}
    results.unlink()  # the next run writes its own
    return records


def _twice(words: list[str], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    return [_run(words, cwd) for _ in range(2)]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_failing_cases_rerun_and_their_scripts_exit_1_then_0_once_fixed(variant, tmp_path):
    database = tmp_path / "ledger.sqlite"
    flags = [word for requirement in VARIANTS[variant] for word in ("--requirement", requirement)]
    with served(variant, database) as url:
        write_target(tmp_path / "target.toml", url, provision={"command": TEMPLATE.format(database=database)})
        _run(["aidememo-conformance", "run", "--config", "target.toml", "--seed", "35", *flags], tmp_path)
        failing = [r for r in _records(tmp_path).values() if r["verdict"] == "FAIL"][:MOST_CASES]
        assert failing, f"{variant}: no check failed"
        for record in failing:
            check = record["nodeid"].rsplit("/", 1)[-1]
            assert shlex.split(record["rerun"])[-1] == check and Path(record["script"]).is_file(), record
            _run(shlex.split(record["rerun"]), tmp_path)
            assert _records(tmp_path)[check]["verdict"] == "FAIL", f"{check}: its rerun alone passed"
            for done in [*_twice(["sh", record["script"]], tmp_path), *_twice(shlex.split(record["replay"]), tmp_path)]:
                assert done.returncode == 1, f"{check}:\n{done.stdout[-3000:]}{done.stderr[-1000:]}"
        port = int(url.rsplit(":", 1)[1])
    with served("reference", database, port):  # the fixed server, on the same file and port
        for record in failing:
            raced = Path(record["script"]).read_text().splitlines()[1].startswith("# RACE, NOT FORCED")
            for done in [*_twice(["sh", record["script"]], tmp_path), *_twice(shlex.split(record["replay"]), tmp_path)]:
                assert done.returncode == (3 if raced else 0), f"{record['nodeid']}:\n{done.stdout[-3000:]}"


def test_a_divergence_script_record_and_replay_exit_1_then_0_once_fixed(tmp_path):
    database = tmp_path / "ledger.sqlite"
    with served("cas_ignored", database) as url:
        write_target(tmp_path / "target.toml", url, provision={"command": TEMPLATE.format(database=database)})
        found = _run(["aidememo-conformance", "diff", "--config", "target.toml", "--seed", "3", "--steps", "400"],
                     tmp_path, timeout=600)
        assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-2000:]
        case = json.loads((tmp_path / "aidememo-report" / "diff.json").read_text())["divergences"][0]
        commands = [["sh", case["script"]], ["aidememo-conformance", "reproduce", case["reproduction"]],
                    shlex.split(case["replay"])]
        for words in commands:
            assert [done.returncode for done in _twice(words, tmp_path)] == [1, 1], words
        port = int(url.rsplit(":", 1)[1])
    with served("reference", database, port):
        for words in commands:
            runs = _twice(words, tmp_path)
            assert [done.returncode for done in runs] == [0, 0], (words, runs[0].stdout[-3000:])
