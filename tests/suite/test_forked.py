"""Commands forked from a warm interpreter are processes of their own: conformance.forked."""

from __future__ import annotations

import json
import os
import resource
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conformance.errors import TargetError
from conformance.forked import ForkServer, available
from conformance.process import CommandExchange, run_command
from conformance.profiles.aidememo_local.target import EMBEDDED, embedded_launcher

pytestmark = pytest.mark.skipif(not available(), reason="needs fork and SOCK_SEQPACKET")

REPO = Path(__file__).resolve().parents[2]
PREFIX = ("forked-entry",)


@pytest.fixture()
def server() -> Iterator[ForkServer]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "FROM_THE_SERVER": "yes"}
    forks = ForkServer(PREFIX, "tests.suite.forked_entry:main", "forked-entry", ["tests.suite.forked_entry"], env=env)
    yield forks
    forks.close()


def _run(server: ForkServer, *words: str, stdin: bytes = b"", env: dict[str, str] | None = None,
         timeout_s: float = 30.0, cwd: str | None = None, max_output_bytes: int = 1 << 20) -> CommandExchange:
    return run_command(None, [*PREFIX, *words], env=env, stdin=stdin, timeout_s=timeout_s, cwd=cwd,
                       max_output_bytes=max_output_bytes, launcher=server)


def test_a_command_sees_its_own_argv_cwd_stdin_and_environment(server: ForkServer, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FROM_THE_SERVER", raising=False)
    done = _run(server, "echo", "GIVEN", "FROM_THE_SERVER", stdin=b"in\n", env={"GIVEN": "value"}, cwd=str(tmp_path))
    seen = json.loads(done.stdout)
    assert done.exit_code == 0 and done.stderr == b"to stderr\n"
    assert seen == {"argv": ["forked-entry", "echo", "GIVEN", "FROM_THE_SERVER"], "cwd": str(tmp_path), "stdin": "in\n",
                    "env": {"GIVEN": "value", "FROM_THE_SERVER": None}}, "the server's environment leaked in"


@pytest.mark.parametrize(("words", "code", "stderr"), [
    (("exit", "3"), 3, ""),
    (("exit", "256"), 0, ""),
    (("message", "went wrong"), 1, "went wrong\n"),
    (("crash",), 1, "RuntimeError: planted"),
    (("signal",), -15, ""),
])
def test_exit_statuses_are_what_a_fresh_interpreter_gives(server: ForkServer, words: tuple[str, ...], code: int,
                                                          stderr: str) -> None:
    fresh = run_command(None, [sys.executable, "-c", "import sys; from tests.suite.forked_entry import main; "
                               "sys.argv[0] = 'forked-entry'; raise SystemExit(main())", *words],
                        env={"PYTHONPATH": str(REPO)}, timeout_s=30, max_output_bytes=1 << 20)
    forked = _run(server, *words)
    assert forked.exit_code == fresh.exit_code == code
    assert stderr in forked.stderr.decode() and stderr in fresh.stderr.decode()
    if stderr.endswith("\n"):
        assert forked.stderr == fresh.stderr


def test_commands_run_at_once(server: ForkServer, tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda pair: _run(server, "meet", *pair), [(a, b), (b, a)]))
    assert [d.exit_code for d in done] == [0, 0], "one command waited for the other to end"


def test_the_deadline_and_the_output_bound_kill_the_command(server: ForkServer) -> None:
    with pytest.raises(TargetError, match="did not finish within the 0.5 s deadline"):
        _run(server, "sleep", "30", timeout_s=0.5)
    with pytest.raises(TargetError, match="printed more than 1000 bytes"):
        _run(server, "flood", "100000", max_output_bytes=1000)
    assert _run(server, "exit", "0").exit_code == 0, "the server did not survive its commands' ends"


def _own_cpu(pid: int) -> float:
    """A process's own CPU seconds, without its reaped children's (``/proc/PID/stat`` utime, stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_commands_cpu_reaches_the_parent_when_the_server_is_stopped(server: ForkServer) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    burned = float(_run(server, "burn", "0.3").stdout)  # CPU seconds, whatever the machine's load
    assert server._server is not None
    # The server's own CPU (its start-up, its imports) reaches the parent too: only what goes
    # beyond it can be the command's.
    own = _own_cpu(server._server.pid)
    server.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counted = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) - own
    assert counted >= 0.9 * burned, f"{counted:.3f} s of the commands' CPU counted, the command burned {burned:.3f} s"


def test_a_server_that_died_is_started_again(server: ForkServer) -> None:
    assert _run(server, "exit", "0").exit_code == 0
    assert server._server is not None
    server._server.kill()
    server._server.wait()
    assert _run(server, "exit", "4").exit_code == 4


def test_the_kits_cli_forked_answers_as_started_fresh(tmp_path: Path) -> None:
    forks = embedded_launcher({})
    try:
        for words in (["--help"], ["handoff", "--help"], ["--json", "session", "list"], ["handoff", "accept"],
                      ["no-such-command"], ["--json", "handoff", "inbox", "--actor-id", "nobody"]):
            argv = [*EMBEDDED, "--store", str(tmp_path / "store.sqlite"), *words]
            fresh = run_command(None, argv, timeout_s=60, max_output_bytes=1 << 20)
            forked = run_command(None, argv, timeout_s=60, max_output_bytes=1 << 20, launcher=forks)
            assert (forked.exit_code, forked.stdout, forked.stderr) == (fresh.exit_code, fresh.stdout, fresh.stderr), words
    finally:
        forks.close()


def test_a_command_line_not_of_the_server_is_refused(server: ForkServer) -> None:
    with pytest.raises(ValueError, match="is not a command of forked-entry"):
        server.start(["python", "-c", "pass"], env={})
