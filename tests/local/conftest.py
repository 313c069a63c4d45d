"""Fixtures for the local flow: an in-process CLI on a fresh store, with a clean environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aidememo_cli._commands import main

REPO = Path(__file__).resolve().parents[2]

# Variables the CLI reads; each test starts without them so nothing leaks from the runner.
_CLI_ENV = (
    "AIDEMEMO_STORE",
    "AIDEMEMO_SESSION_ID",
    "AIDEMEMO_SOURCE_ID",
    "AIDEMEMO_ACTOR_ID",
    "AIDEMEMO_NOW_MS",
    "AIDEMEMO_REMOTE_PROFILE",
    "AIDEMEMO_WORKER_LANE_BIN",
    "AIDEMEMO_BIN",
    "AIDEMEMO_SOURCE_FROM_HERMES",
    "AIDEMEMO_ACTOR_FROM_HERMES_PROFILE",
    "HERMES_KANBAN_BOARD",
    "HERMES_KANBAN_TASK",
    "HERMES_TENANT",
    "HERMES_PROFILE",
)


@dataclass(frozen=True, slots=True)
class Result:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Cli:
    """Runs ``aidememo_cli._commands.main`` against one store file."""

    def __init__(self, store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self._capsys = capsys
        self._monkeypatch = monkeypatch

    def run(self, *argv: str, env: dict[str, str | None] | None = None) -> Result:
        with self._monkeypatch.context() as patch:
            for name, value in (env or {}).items():
                if value is None:
                    patch.delenv(name, raising=False)
                else:
                    patch.setenv(name, value)
            rc = main(["--store", str(self.store), *argv])
        out, err = self._capsys.readouterr()
        return Result(rc, out, err)

    def ok(self, *argv: str, env: dict[str, str | None] | None = None) -> Result:
        result = self.run(*argv, env=env)
        assert result.rc == 0, f"{argv} failed: {result.err}"
        return result

    def j(self, *argv: str, env: dict[str, str | None] | None = None) -> Any:
        return self.ok("--json", *argv, env=env).json()

    def refused(self, *argv: str, env: dict[str, str | None] | None = None) -> str:
        """Run with ``--json``; it must fail with upstream's one line ``Error: <message>`` and
        exit 1. Returns the message."""
        result = self.run("--json", *argv, env=env)
        assert result.rc == 1, f"{argv} should be refused: rc={result.rc} out={result.out}"
        assert result.out == ""
        lines = result.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), result.err
        return lines[0][len("Error: "):]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in _CLI_ENV:
        monkeypatch.delenv(name, raising=False)
    return Cli(tmp_path / "store.sqlite", capsys, monkeypatch)


@dataclass(frozen=True, slots=True)
class Handoff:
    """A session with one decision, a manual receiver profile and one pending assignment."""

    session_id: str
    handoff_id: str
    workspace: Path


SENDER = "codex-one"
RECEIVER = "codex-two"
SOURCE = "release-team"


@pytest.fixture
def sent(cli: Cli, tmp_path: Path) -> Handoff:
    session_id = cli.j("session", "new", "--source-id", SOURCE, "Redis timeout review")["session_id"]
    env = {"AIDEMEMO_SESSION_ID": session_id, "AIDEMEMO_SOURCE_ID": SOURCE, "AIDEMEMO_ACTOR_ID": SENDER}
    cli.ok("fact", "add", "Use exponential backoff", "--type", "decision", "--source-id", SOURCE, env=env)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cli.ok("agent", "add", RECEIVER, "--type", "manual", "--workspace", str(workspace), "--source-id", SOURCE)
    record = cli.j("handoff", "send", RECEIVER, "--focus", "Review", "--done-when", "tests pass", env=env)
    return Handoff(session_id, record["handoff_id"], workspace)


def receiver_fact(cli: Cli, handoff: Handoff, content: str = "review passed", **extra: str) -> str:
    """A fact that satisfies every return rule unless ``extra`` overrides a flag."""
    flags = {"--actor-id": RECEIVER, "--source-id": SOURCE, "--session-id": handoff.session_id} | extra
    argv = [item for pair in flags.items() for item in pair if pair[1] != ""]
    fact_id: str = cli.j("fact", "add", content, *argv)["id"]
    return fact_id


def run_cli(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process (for eval, exit codes and start-up)."""
    child_env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    child_env["PYTHONPATH"] = str(REPO) + os.pathsep + child_env.get("PYTHONPATH", "")
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "aidememo_cli._commands", *argv],
        capture_output=True,
        text=True,
        env=child_env,
        cwd=cwd,
        timeout=120,
    )
