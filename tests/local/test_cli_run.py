"""`handoff run`: delegation to `aidememo-worker-lane` as upstream does it, and the built-in fallback."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from .conftest import RECEIVER, SENDER, SOURCE, Cli, Handoff

PY = shlex.quote(sys.executable)

# A stand-in for upstream's worker lane: it records how it was started and answers like the real one.
STUB = f"""#!{sys.executable}
import json, os, sys
record = {{"argv": sys.argv[1:], "AIDEMEMO_BIN": os.environ.get("AIDEMEMO_BIN"), "KEEP": os.environ.get("KEEP_ME")}}
with open(os.environ["STUB_LOG"], "w") as handle:
    json.dump(record, handle)
if os.environ.get("STUB_FAIL"):
    print(json.dumps({{"ok": False, "status": "failed", "error": "external worker failed"}}))
    print("worker lane diagnostics", file=sys.stderr)
    sys.exit(3)
print(json.dumps({{"ok": True, "status": "completed", "handoff_id": "h", "result_fact_id": "f"}}))
"""


@pytest.fixture
def stub(tmp_path: Path) -> Path:
    path = tmp_path / "aidememo-worker-lane"
    path.write_text(STUB)
    path.chmod(0o755)
    return path


def _codex_profile(cli: Cli, workspace: Path, *extra: str) -> None:
    cli.ok("agent", "add", "codex-bot", "--type", "codex", "--workspace", str(workspace), "--source-id", SOURCE, *extra)


def test_run_hands_the_run_to_the_worker_lane_with_upstreams_argument_list(cli: Cli, sent: Handoff, stub: Path,
                                                                           tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _codex_profile(cli, sent.workspace, "--binary", "/opt/codex", "--home", str(home), "--model", "m-1",
                   "--pass-env", "OPENAI_KEY_NAME", "--pass-env", "OTHER")
    log = tmp_path / "stub.json"
    env = {"AIDEMEMO_WORKER_LANE_BIN": str(stub), "STUB_LOG": str(log), "KEEP_ME": "the full environment"}
    out = cli.ok("handoff", "run", "codex-bot", "--kanban-task", "card-1", "--timeout", "14400",
                 "--heartbeat-interval", "60", env=env).out
    assert json.loads(out) == {"ok": True, "status": "completed", "handoff_id": "h", "result_fact_id": "f"}
    started = json.loads(log.read_text())
    assert started["argv"] == [
        "--next", "--actor-id", "codex-bot", "--agent", "codex", "--workspace", str(sent.workspace),
        "--store", str(cli.store), "--backend", "sqlite", "--env-policy", "core", "--binary", "/opt/codex",
        "--config-home", str(home), "--source-id", SOURCE, "--model", "m-1", "--pass-env", "OPENAI_KEY_NAME",
        "--pass-env", "OTHER", "--kanban-task", "card-1", "--timeout", "14400", "--heartbeat-interval", "60",
    ]
    assert started["KEEP"] == "the full environment"
    assert started["AIDEMEMO_BIN"] and os.access(started["AIDEMEMO_BIN"], os.X_OK)  # this CLI, as one executable
    # A handoff id instead of --next; optional flags only when set; the JSON is printed as it came.
    cli.ok("--json", "handoff", "run", "codex-bot", sent.handoff_id, env=env)
    argv = json.loads(log.read_text())["argv"]
    assert argv[:2] == [sent.handoff_id, "--actor-id"] and "--timeout" not in argv and "--kanban-task" not in argv
    assert cli.j("handoff", "show", sent.handoff_id)["status"] == "pending"  # the runner, not the CLI, accepts


def test_a_failing_worker_lane_is_reported_as_upstream_does(cli: Cli, sent: Handoff, stub: Path, tmp_path: Path) -> None:
    _codex_profile(cli, sent.workspace)
    env = {"AIDEMEMO_WORKER_LANE_BIN": str(stub), "STUB_LOG": str(tmp_path / "log"), "STUB_FAIL": "1"}
    assert cli.refused("handoff", "run", "codex-bot", env=env) == (
        "internal error: external handoff worker failed (status exit status: 3): worker lane diagnostics")
    missing = {"AIDEMEMO_WORKER_LANE_BIN": str(tmp_path / "nowhere")}
    assert cli.refused("handoff", "run", "codex-bot", env=missing).startswith(
        f'internal error: could not start "{tmp_path / "nowhere"}": ')


def test_run_refusals_before_anything_runs(cli: Cli, sent: Handoff, stub: Path, tmp_path: Path) -> None:
    env = {"AIDEMEMO_WORKER_LANE_BIN": str(stub), "STUB_LOG": str(tmp_path / "log")}
    assert cli.refused("handoff", "run", RECEIVER, env=env) == (
        f'invalid input: agent "{RECEIVER}" uses the manual adapter; read/accept/heartbeat/return it through CLI,'
        " MCP, or the Python SDK")
    assert cli.refused("handoff", "run", "nobody", env=env) == (
        'invalid input: installation "nobody" not found; add it with `aidememo installation add`')
    _codex_profile(cli, sent.workspace)
    assert cli.refused("handoff", "run", "codex-bot", sent.handoff_id, "--next", env=env) == (
        "invalid input: pass HANDOFF_ID or --next, not both")
    assert cli.refused("handoff", "run", "codex-bot", "--workspace", str(tmp_path / "nope"), env=env) == (
        f"invalid input: worker workspace is not a directory: {tmp_path / 'nope'}")
    assert cli.refused("handoff", "run", env=env) == "invalid input: pass an agent alias, e.g. `aidememo handoff run codex-two`"
    assert not (tmp_path / "log").exists()  # the runner never started
    assert cli.j("handoff", "show", sent.handoff_id)["status"] == "pending"


def _command_agent(cli: Cli, alias: str, code: str, *extra: str) -> None:
    cli.ok("agent", "add", alias, "--type", "command", "--command", f"{PY} -c {shlex.quote(code)}", "--source-id", SOURCE,
           *extra)


def _send(cli: Cli, handoff: Handoff, alias: str, **env: str) -> str:
    base = {"AIDEMEMO_SESSION_ID": handoff.session_id, "AIDEMEMO_ACTOR_ID": SENDER} | env
    handoff_id: str = cli.j("handoff", "send", alias, "--focus", "do it", env=base)["handoff_id"]
    return handoff_id


def test_builtin_runner_runs_the_oldest_pending_and_returns_a_linked_result(cli: Cli, sent: Handoff, stub: Path) -> None:
    code = ("import os, sys; packet = sys.stdin.read(); print('reviewed', os.environ['AIDEMEMO_HANDOFF_ID'],"
            " os.environ['AIDEMEMO_ACTOR_ID'], 'packet-ok' if 'Use exponential backoff' in packet else 'missing')")
    _command_agent(cli, "bot", code)
    first = _send(cli, sent, "bot", AIDEMEMO_NOW_MS="1000000000000")
    second = _send(cli, sent, "bot", AIDEMEMO_NOW_MS="1000000000001")
    # Even with a worker lane installed, the kit's own command adapter runs here (and says so).
    result = cli.run("handoff", "run", "bot", env={"AIDEMEMO_WORKER_LANE_BIN": str(stub)})
    assert result.rc == 0 and result.err == "note: the command adapter is this kit's own; ran aidememo-ref's built-in runner\n"
    data = json.loads(result.out)
    assert (data["ok"], data["status"], data["handoff_id"], data["exit_code"], data["runner"]) == (
        True, "completed", first, 0, "aidememo-ref built-in")
    assert f"reviewed {first} bot packet-ok" in data["result"]
    record = cli.j("handoff", "show", first)
    assert (record["status"], record["outcome"], record["result_fact_id"]) == ("completed", "succeeded", data["result_fact_id"])
    assert record["claim_id"].startswith("worker-") and len(record["claim_id"]) == len("worker-") + 32
    fact = cli.j("fact", "get", data["result_fact_id"])
    assert (fact["fact_type"], fact["actor_id"], fact["source_id"], fact["tags"]) == ("note", "bot", SOURCE,
                                                                                     ["worker-lane", "command", first])
    assert fact["content"].startswith(f"External worker result (command, handoff {first}):\n")
    assert cli.j("handoff", "show", second)["status"] == "pending"


def test_builtin_failure_writes_an_error_fact_stays_accepted_and_is_reclaimed(cli: Cli, sent: Handoff) -> None:
    _command_agent(cli, "broken", "import sys; print('partial'); print('boom', file=sys.stderr); sys.exit(3)")
    handoff_id = _send(cli, sent, "broken")
    message = cli.refused("handoff", "run", "broken", handoff_id)
    assert message.startswith("internal error: external handoff worker failed (status exit status: 1): {")
    data = json.loads(message.split(": ", 3)[3])
    assert (data["ok"], data["status"], data["exit_code"], data["assignment_status"]) == (False, "failed", 3, "accepted")
    error_fact = cli.j("fact", "get", data["error_fact_id"])
    assert error_fact["fact_type"] == "error" and "exit_code=3, timed_out=false" in error_fact["content"]
    assert "boom" in error_fact["content"]
    assert cli.j("handoff", "show", handoff_id)["outcome"] == "failed"
    cli.ok("agent", "add", "broken", "--type", "command", "--command", f"{PY} -c \"print('fixed')\"", "--source-id", SOURCE)
    retry = json.loads(cli.ok("handoff", "run", "broken", handoff_id).out)
    assert retry["ok"] and cli.j("handoff", "show", handoff_id)["attempt_count"] == 2


def test_builtin_timeout_and_heartbeats(cli: Cli, sent: Handoff) -> None:
    _command_agent(cli, "slow", "import time; time.sleep(60)")
    handoff_id = _send(cli, sent, "slow")
    data = json.loads(cli.refused("handoff", "run", "slow", "--timeout", "1").split(": ", 3)[3])
    assert (data["timed_out"], data["exit_code"]) == (True, 124)
    assert "timed_out=true" in cli.j("fact", "get", data["error_fact_id"])["content"]
    assert cli.j("handoff", "show", handoff_id)["status"] == "accepted"
    # The command waits until it sees a heartbeat in the store: no dependence on machine speed.
    code = ("import json, os, sqlite3, time\n"
            "db = sqlite3.connect(os.environ['AIDEMEMO_STORE'])\n"
            "for _ in range(3000):\n"
            "    row = db.execute('select record from handoffs where handoff_id = ?', (os.environ['AIDEMEMO_HANDOFF_ID'],)).fetchone()\n"
            "    if json.loads(row[0])['heartbeat_count'] >= 1: print('saw a heartbeat'); break\n"
            "    time.sleep(0.01)\n")
    _command_agent(cli, "patient", code)
    beating = _send(cli, sent, "patient")
    ran = json.loads(cli.ok("handoff", "run", "patient", "--heartbeat-interval", "1", "--timeout", "60").out)
    assert ran["ok"] and ran["heartbeat_count"] >= 1 and cli.j("handoff", "show", beating)["heartbeat_count"] >= 1


def test_builtin_checks_before_accepting_and_keeps_a_workers_own_evidence(cli: Cli, sent: Handoff) -> None:
    cli.ok("agent", "add", "ghost", "--type", "command", "--command", "definitely-not-a-binary-xyz", "--source-id", SOURCE)
    handoff_id = _send(cli, sent, "ghost")
    assert cli.refused("handoff", "run", "ghost") == (
        "invalid input: executable 'definitely-not-a-binary-xyz' was not found; install it or fix the agent profile")
    assert cli.j("handoff", "show", handoff_id)["status"] == "pending"
    code = ("import json, os, subprocess, sys\n"
            "cli = [sys.executable, '-m', 'aidememo_cli._commands', '--json']\n"
            "fact = json.loads(subprocess.run([*cli, 'fact', 'add', 'worker wrote this', '--session-id',"
            " os.environ['AIDEMEMO_SESSION_ID'], '--source-id', os.environ['AIDEMEMO_SOURCE_ID']], check=True,"
            " capture_output=True, text=True).stdout)\n"
            "subprocess.run([*cli, 'handoff', 'return', '--outcome', 'succeeded', '--result-fact-id', fact['id'],"
            " os.environ['AIDEMEMO_HANDOFF_ID']], check=True, capture_output=True)\n"
            "print('done')\n")
    _command_agent(cli, "self-returner", code, "--env-policy", "all")
    own = _send(cli, sent, "self-returner")
    data = json.loads(cli.ok("handoff", "run", "self-returner").out)
    record = cli.j("handoff", "show", own)
    assert data["ok"] and data["result_fact_id"] == record["result_fact_id"]
    assert cli.j("fact", "get", record["result_fact_id"])["content"] == "worker wrote this"


def test_builtin_codex_and_claude_use_the_worker_lanes_command_lines(cli: Cli, sent: Handoff, tmp_path: Path) -> None:
    # Stand-in vendor binaries: they report argv, config home and the prompt; codex answers through
    # its --output-last-message file, as the real one does.
    for agent, home_var in (("codex", "CODEX_HOME"), ("claude", "CLAUDE_CONFIG_DIR")):
        fake = tmp_path / f"fake-{agent}"
        fake.write_text(
            f"#!{sys.executable}\n"
            "import os, sys\n"
            "argv = sys.argv[1:]\n"
            f"text = ' '.join(['argv=' + '|'.join(argv), 'home=' + os.environ.get({home_var!r}, '-'),"
            " 'secret=' + os.environ.get('BENCH_SECRET', '-'), 'packet=' + str('# AideMemo Agent Handoff' in sys.stdin.read())])\n"
            "if '--output-last-message' in argv:\n"
            "    open(argv[argv.index('--output-last-message') + 1], 'w').write(text)\n"
            "else:\n"
            "    print(text)\n"
        )
        fake.chmod(0o755)
        home = tmp_path / f"{agent}-home"
        home.mkdir()
        alias = f"{agent}-bot"
        cli.ok("agent", "add", alias, "--type", agent, "--binary", str(fake), "--home", str(home), "--model", "m-1",
               "--workspace", str(sent.workspace), "--source-id", SOURCE)
        _send(cli, sent, alias)
        data = json.loads(cli.ok("handoff", "run", alias, env={"BENCH_SECRET": "leak"}).out)
        assert data["ok"], data
        argv = data["result"].split(" home=")[0].removeprefix("argv=").split("|")
        if agent == "codex":
            assert argv[:8] == ["exec", "--cd", str(sent.workspace), "--sandbox", "workspace-write", "--ephemeral",
                                "--color", "never"]
            assert argv[8] == "--output-last-message" and argv[10:] == ["--model", "m-1", "-"]
        else:
            assert argv == ["--print", "--permission-mode", "acceptEdits", "--output-format", "text",
                            "--no-session-persistence", "--model", "m-1"]
        assert data["result"].endswith(f"home={home} secret=- packet=True")  # core policy drops BENCH_SECRET
    cli.ok("agent", "add", "codex-bot", "--type", "codex", "--binary", str(tmp_path / "fake-codex"), "--source-id",
           SOURCE, "--workspace", str(sent.workspace), "--pass-env", "BENCH_SECRET")
    _send(cli, sent, "codex-bot")
    assert "secret=leak" in json.loads(cli.ok("handoff", "run", "codex-bot", env={"BENCH_SECRET": "leak"}).out)["result"]
