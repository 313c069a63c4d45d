"""The implementer's loop over a URL (issue 20): find a bug on a served reference that keeps its
database, fix it, and run every command the simulator printed again, twice, as printed.

The server is the reference on a file database with the test clock, provisioned by the bootstrap
command of a target file, as ``docs/examples/aidememo-ref.toml`` runs it. The planted bug
(``served.blind_accept``) shows with requests one at a time, so over a URL it reproduces every
time; "fixing" it is serving the correct reference again on the same database and port. Every
printed command runs through ``sh`` from the directory the run was made in, with the venv's
console scripts first on PATH; no token may appear in any printed line, file or script output.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from simulations.campaign import rerun_over_http, run_campaign
from simulations.model import LEASE_MS
from simulations.plan import READER, Batch, Plan, PlannedOp
from simulations.targets import HttpTarget, token_variable

from .served import bootstrap_command, served_file

BIN = Path(sys.executable).parent
SIM_TOKEN = re.compile(r"sim-[0-9a-f]{32}|\b[0-9a-f]{32}\b")  # what the simulator and the script provision


class Server:
    """The reference on one database and one port, served with or without the planted bug."""

    def __init__(self, root: Path) -> None:
        self.database = root / "ref.sqlite"
        self.config = root / "target.toml"
        self.port = 0

    @contextmanager
    def serving(self, *, bug: bool) -> Iterator[str]:
        with served_file(self.database, self.config, bug=bug, port=self.port) as url:
            self.port = int(url.rsplit(":", 1)[1])
            yield url


def _sh(command: str, cwd: Path, env: Mapping[str, str] = {}) -> subprocess.CompletedProcess[str]:
    """Run a printed command as a user pastes it into a shell."""
    environ = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **env}
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300)


def _printed(out: str, label: str) -> str:
    lines = [line.removeprefix(f"{label}: ") for line in out.splitlines() if line.startswith(f"{label}: ")]
    assert len(lines) == 1, out
    return lines[0]


def _twice(command: str, cwd: Path, env: Mapping[str, str] = {}) -> list[subprocess.CompletedProcess[str]]:
    """Run a printed command twice; both runs must give the same exit status."""
    runs = [_sh(command, cwd, env) for _ in range(2)]
    assert runs[0].returncode == runs[1].returncode, (command, runs[0].stdout[-1500:], runs[1].stdout[-1500:])
    return runs


def _no_secret(texts: list[str], tokens: Mapping[str, str] = {}) -> None:
    for text in texts:
        assert not SIM_TOKEN.search(text), SIM_TOKEN.search(text)
        for token in tokens.values():
            assert token not in text
        assert "set -x" not in text


def _exports(out_dir: Path) -> list[str]:
    return [path.read_text() for path in sorted(out_dir.iterdir()) if path.is_file()]


def test_a_target_file_run_fix_and_rerun_loop(tmp_path: Path) -> None:
    server = Server(tmp_path)
    with server.serving(bug=True):
        first = "aidememo-sim run --seed 4 --actors 3 --budget 120 --batches 20 --config target.toml"
        found = _sh(first + " --out out", tmp_path)
        assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-2000:]
        out = found.stdout
        # Found over a URL, shrunk there too, with how often the shrunk case reproduces.
        assert "shrinking over the URL" in out and "shrunk to" in out
        assert "the shrunk case reproduced 10/10" in out, out  # a bug requests one at a time show: every time
        rerun, replay = _printed(out, "replay this run with"), _printed(out, "reproduce with")
        assert replay == f"aidememo-sim replay out/race-seed-4.json --config {tmp_path / 'target.toml'}"  # named: a file runs no code
        pytest_file, script = _printed(out, "pytest file"), _printed(out, "curl script")
        recorded_project = json.loads(Path(tmp_path, "out/race-seed-4.json").read_text())["plan"]["project"]
        assert recorded_project not in Path(tmp_path, script).read_text()  # never the recorded project
        assert rerun == first  # the run above was the printed rerun's first run
        checked = [found]
        for done in _twice(replay + " --times 2", tmp_path):
            assert done.returncode == 1 and "reproduced 2/2" in done.stdout, done.stdout[-2000:] + done.stderr
        for done in _twice(f"pytest -q {pytest_file}", tmp_path):
            assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout[-2000:]
        record = _printed(out, "reproduction record")
        # The timeline's command names the target file: a record's own provisioning command is never run.
        reproduce = f"aidememo-conformance reproduce --config {tmp_path / 'target.toml'} {record}"
        assert html.escape(reproduce) in Path(tmp_path, "out/race-seed-4.html").read_text(), reproduce
        for done in [*_twice(f"sh {script}", tmp_path), *_twice(reproduce, tmp_path)]:
            assert done.returncode == 1 and "the bug shows" in done.stdout, done.stdout[-2000:] + done.stderr
            checked.append(done)
    with server.serving(bug=False):  # the fix: the correct reference, on the database that kept every run
        replays = [*_twice(replay + " --times 2", tmp_path), _sh(replay + " --config target.toml --times 2", tmp_path)]
        for done in replays:
            assert done.returncode == 0 and "reproduced 0/2" in done.stdout, done.stdout[-2000:] + done.stderr
        for done in _twice(rerun, tmp_path):
            assert done.returncode == 0 and "verdict OK" in done.stdout, done.stdout[-2000:]
        for done in _twice(f"pytest -q {pytest_file}", tmp_path):
            assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:]
        # The fix shows nothing: 0, or 3 for a plan whose batches race (a script cannot force them).
        scripts = [*_twice(f"sh {script}", tmp_path), *_twice(reproduce, tmp_path)]
        raced = "RACE, NOT FORCED" in Path(tmp_path, script).read_text()
        for done in scripts:
            assert done.returncode == (3 if raced else 0), done.stdout[-2000:] + done.stderr
    _no_secret([*(d.stdout + d.stderr for d in checked + replays + scripts), *_exports(tmp_path / "out")])


def _provision(server: Server, project: str) -> dict[str, str]:
    """Fixed tokens in ``project``, through the target file's bootstrap command."""
    tokens = {}
    for actor in ("agent-a", "agent-b", "agent-c", READER):
        tokens[actor] = f"fixed{actor.replace('-', '')}0123456789"
        token_file = server.database.parent / f"{actor}.token"
        token_file.write_text(tokens[actor])
        token_file.chmod(0o600)
        command = bootstrap_command(server.database).format(
            tenant="t", project=project, actor=actor, token_file=token_file, role="reader" if actor == READER else "writer")
        subprocess.run(command.split(), check=True, capture_output=True, timeout=60)
        token_file.unlink()
    return tokens


def test_a_url_run_with_tokens_fix_and_rerun_loop(tmp_path: Path) -> None:
    from simulations.errors import SimulationError
    from simulations.replay import load_replay, replay_target

    server = Server(tmp_path)
    tokens = _provision(server, "given")
    env = {token_variable(actor): token for actor, token in tokens.items()}
    flags = " ".join(f"--token {actor}=${token_variable(actor)}" for actor in tokens)
    with server.serving(bug=True) as url:
        found = _sh(f"aidememo-sim run --url {url} --project given {flags} --seed 5 --batches 20 --budget 120 "
                    "--out out", tmp_path, env)
        assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-2000:]
        out = found.stdout
        assert "shrinking over the URL" in out and "the shrunk case reproduced 10/10" in out
        rerun, replay = _printed(out, "replay this run with"), _printed(out, "reproduce with")
        # The target was given, not recorded: the printed command gives it again, tokens as variables.
        assert f"--url {url} --project given" in replay and "--token agent-a --token" in replay  # read from TOKEN_AGENT_A
        pytest_file, script = _printed(out, "pytest file"), _printed(out, "curl script")
        checked = [found, _sh(rerun, tmp_path, env)]
        assert checked[-1].returncode == 1, checked[-1].stdout[-2000:]
        checked += _twice(replay + " --times 2", tmp_path, env)
        assert all(d.returncode == 1 and "reproduced 2/2" in d.stdout for d in checked[-2:]), checked[-1].stdout
        checked.append(_sh(f"pytest -q {pytest_file}", tmp_path, env))
        assert checked[-1].returncode == 1 and "1 failed" in checked[-1].stdout, checked[-1].stdout[-2000:]
        checked += _twice(f"sh {script}", tmp_path, env)
        assert all(d.returncode == 1 and "the bug shows" in d.stdout for d in checked[-2:]), checked[-1].stdout
    # Without a token the exported test cannot start: it says which variable to set.
    doc = load_replay(Path(tmp_path, replay.split()[2]))
    with pytest.raises(SimulationError, match="set TOKEN_AGENT_A"):
        replay_target(doc, {k: v for k, v in env.items() if k != "TOKEN_AGENT_A"})
    with server.serving(bug=False):
        checked.append(_sh(rerun, tmp_path, env))
        assert checked[-1].returncode == 0 and "verdict OK" in checked[-1].stdout, checked[-1].stdout[-2000:]
        checked += _twice(replay + " --times 2", tmp_path, env)
        assert all(d.returncode == 0 and "reproduced 0/2" in d.stdout for d in checked[-2:]), checked[-1].stdout
        checked.append(_sh(f"pytest -q {pytest_file}", tmp_path, env))
        assert checked[-1].returncode == 0 and "1 passed" in checked[-1].stdout, checked[-1].stdout[-2000:]
        checked += _twice(f"sh {script}", tmp_path, env)
        raced = "RACE, NOT FORCED" in Path(tmp_path, script).read_text()
        assert all(d.returncode == (3 if raced else 0) for d in checked[-2:]), checked[-1].stdout[-2000:]
    _no_secret([*(d.stdout + d.stderr for d in checked), *_exports(tmp_path / "out")], tokens)


def test_a_replay_over_a_url_keeps_the_plans_clock_steps(tmp_path: Path) -> None:
    """A test-clock server's clock has moved on (and only moves forward) by the time a plan is
    replayed: each batch keeps its step from the one before, so leases expire in the replay
    exactly where they did in the run, and the model is told the server's time."""
    server = Server(tmp_path)
    tokens = _provision(server, "p")
    with server.serving(bug=False) as url:
        target = HttpTarget(url, "p", tokens)
        first = run_campaign(seed=2, max_batches=15, budget_s=60, target=target)
        assert first.finding is None, first.finding.explanation
        clocks = [b.clock_ms for b in first.plan.batches]
        assert all(c is not None for c in clocks)
        steps = [b - a for a, b in zip(clocks, clocks[1:])]  # type: ignore[operator]
        assert any(step > LEASE_MS for step in steps), steps  # leases expire between batches
        for _ in range(2):
            again = rerun_over_http(first.plan, first.seed, target)
            assert again.finding is None, again.finding.explanation
            told = sorted({op.input["now_ms"] for op in again.history if op.input.get("now_ms") is not None})
            assert told and told[0] > clocks[-1]  # type: ignore[operator]  # the server's time, not the plan's


def test_a_plan_is_rebased_into_another_project_with_fresh_ids() -> None:
    op = PlannedOp(worker=0, input={"op": "handoff.accept", "actor": "agent-a", "handoff_id": "handoff-s1xab-3",
                                    "command_id": "cmd-accept-s1xab-4", "now_ms": 5,
                                    "payload": {"claim_id": "claim-s1xab-2"}},
                   method="POST", path="/v1/projects/sim-1234/handoffs/handoff-s1xab-3/accept",
                   body={"command_id": "cmd-accept-s1xab-4", "expected_revision": 1,
                         "payload": {"claim_id": "claim-s1xab-2"}})
    plan = Plan(actors=("agent-a", "agent-b"), workers=("agent-a",), batches=(Batch(clock_ms=5, ops=(op,)),),
                run_id="s1xab", project="sim-1234")
    moved = plan.rebased("s9xcd", "sim-5678")
    text = repr(moved.to_json())
    assert "s1xab" not in text and "sim-1234" not in text
    assert moved.batches[0].ops[0].path == "/v1/projects/sim-5678/handoffs/handoff-s9xcd-3/accept"
    assert moved.batches[0].ops[0].body == {"command_id": "cmd-accept-s9xcd-4", "expected_revision": 1,
                                            "payload": {"claim_id": "claim-s9xcd-2"}}
    # A replay file written before plans named their project: its paths do.
    old = moved.to_json()
    del old["project"]
    assert Plan.from_json(old).project == "sim-5678"
