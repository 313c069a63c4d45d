"""`handoff run`: manual refused, the `command` adapter end to end, timeouts and heartbeats."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .conftest import RECEIVER, SENDER, SOURCE, Cli, Handoff

PY = shlex.quote(sys.executable)


def _command_agent(cli: Cli, alias: str, code: str, *extra: str) -> None:
    cli.ok("agent", "add", alias, "--type", "command", "--command", f"{PY} -c {shlex.quote(code)}", "--source-id", SOURCE, *extra)


def _send(cli: Cli, handoff: Handoff, alias: str, **env: str) -> str:
    base = {"AIDEMEMO_SESSION_ID": handoff.session_id, "AIDEMEMO_ACTOR_ID": SENDER} | env
    handoff_id: str = cli.j("handoff", "send", alias, "--focus", "do it", env=base)["handoff_id"]
    return handoff_id


def test_run_refuses_manual_profiles_and_leaves_the_assignment_pending(cli: Cli, sent: Handoff) -> None:
    assert cli.refused("handoff", "run", RECEIVER)["message"] == (
        f'invalid input: agent "{RECEIVER}" uses the manual adapter; read/accept/heartbeat/return it through the handoff commands'
    )
    assert cli.j("handoff", "show", sent.handoff_id)["status"] == "pending"


def test_command_adapter_runs_the_oldest_pending_and_returns_a_linked_result(cli: Cli, sent: Handoff) -> None:
    code = (
        "import os, sys; packet = sys.stdin.read(); "
        "print('reviewed', os.environ['AIDEMEMO_HANDOFF_ID'], os.environ['AIDEMEMO_ACTOR_ID'], os.environ['AIDEMEMO_SOURCE_ID'], "
        "'packet-ok' if '# AideMemo Agent Handoff' in packet and 'Use exponential backoff' in packet else 'packet-missing')"
    )
    _command_agent(cli, "bot", code)
    first = _send(cli, sent, "bot", AIDEMEMO_NOW_MS="1000000000000")
    second = _send(cli, sent, "bot", AIDEMEMO_NOW_MS="1000000000001")
    result = cli.j("handoff", "run", "bot")
    assert (result["ok"], result["status"], result["handoff_id"], result["exit_code"], result["timed_out"]) == (True, "completed", first, 0, False)
    assert result["claim_id"].startswith("worker-") and len(result["claim_id"]) == len("worker-") + 32
    assert f"reviewed {first} bot {SOURCE} packet-ok" in result["result"]
    record = cli.j("handoff", "show", first)
    assert (record["status"], record["outcome"], record["result_fact_id"], record["claim_id"]) == (
        "completed", "succeeded", result["result_fact_id"], result["claim_id"],
    )
    fact = cli.j("fact", "get", result["result_fact_id"])
    assert (fact["type"], fact["actor_id"], fact["source_id"]) == ("note", "bot", SOURCE)
    assert set(fact["entities"]) == {sent.session_id, "ExternalWorker", "ExternalWorker:command"}
    # The sender sees the linked result without opening the worker's output.
    outbox = {r["handoff_id"]: r for r in cli.j("handoff", "outbox", "--actor-id", SENDER)["assignments"]}
    assert outbox[first]["result_fact_id"] == fact["fact_id"]
    assert cli.j("handoff", "show", second)["status"] == "pending"
    text = cli.ok("handoff", "run", "bot", "--next").out.strip()
    assert text.startswith(f"Ran handoff {second} with bot (command): status=completed outcome=succeeded assignment=completed")
    assert cli.refused("handoff", "run", "bot")["message"] == "invalid input: no pending handoff assignment for bot"


def test_a_failing_command_writes_an_error_fact_and_stays_accepted(cli: Cli, sent: Handoff) -> None:
    _command_agent(cli, "broken", "import sys; print('partial'); print('boom', file=sys.stderr); sys.exit(3)")
    handoff_id = _send(cli, sent, "broken")
    result = cli.run("--json", "handoff", "run", "broken", handoff_id)
    assert result.rc == 1 and result.err.count("\n") == 1 and result.err.startswith(f"Error: handoff {handoff_id} failed:")
    data = result.json()
    assert (data["ok"], data["status"], data["exit_code"], data["assignment_status"], data["result_fact_id"]) == (False, "failed", 3, "accepted", None)
    error_fact = cli.j("fact", "get", data["error_fact_id"])
    assert error_fact["type"] == "error" and "exited 3" in error_fact["content"] and "boom" in error_fact["content"]
    record = cli.j("handoff", "show", handoff_id)
    assert (record["outcome"], record["result_fact_id"], record["attempt_count"]) == ("failed", data["error_fact_id"], 1)
    board = cli.j("handoff", "board")
    assert {i["assignment"]["handoff_id"]: i["next_action"] for i in board["assignments"]}[handoff_id] == "orchestrator_retry_or_close"
    # A new run re-claims the failed attempt with a fresh worker claim.
    cli.ok("agent", "add", "broken", "--type", "command", "--command", f"{PY} -c \"print('fixed')\"", "--source-id", SOURCE)
    retry = cli.j("handoff", "run", "broken", handoff_id)
    assert retry["ok"] and retry["claim_id"] != data["claim_id"]
    assert cli.j("handoff", "show", handoff_id)["attempt_count"] == 2


def test_empty_output_is_not_success(cli: Cli, sent: Handoff) -> None:
    _command_agent(cli, "silent", "pass")
    handoff_id = _send(cli, sent, "silent")
    assert cli.run("handoff", "run", "silent").rc == 1
    assert cli.j("handoff", "show", handoff_id)["outcome"] == "failed"


def test_timeout_kills_the_command_and_fails_the_attempt(cli: Cli, sent: Handoff) -> None:
    _command_agent(cli, "slow", "import time; time.sleep(60)")
    handoff_id = _send(cli, sent, "slow")
    result = cli.run("--json", "handoff", "run", "slow", "--timeout", "0.5")
    data = result.json()
    assert result.rc == 1 and (data["timed_out"], data["exit_code"], data["status"]) == (True, 124, "failed")
    assert "timed out after 0.5 s" in cli.j("fact", "get", data["error_fact_id"])["content"]
    assert cli.j("handoff", "show", handoff_id)["status"] == "accepted"


def test_heartbeats_are_written_while_the_command_runs(cli: Cli, sent: Handoff) -> None:
    # The command waits until it sees a heartbeat in the store; without heartbeats it would hit
    # the timeout and the run would fail, so nothing here depends on how fast the machine is.
    code = (
        "import json, os, sqlite3, time\n"
        "db = sqlite3.connect(os.environ['AIDEMEMO_STORE'])\n"
        "for _ in range(6000):\n"
        "    row = db.execute('select record from handoffs where handoff_id = ?', (os.environ['AIDEMEMO_HANDOFF_ID'],)).fetchone()\n"
        "    if json.loads(row[0])['heartbeat_count'] >= 2: print('saw heartbeats'); break\n"
        "    time.sleep(0.01)\n"
    )
    _command_agent(cli, "patient", code)
    handoff_id = _send(cli, sent, "patient")
    data = cli.j("handoff", "run", "patient", "--heartbeat-interval", "0.05", "--timeout", "60")
    assert data["ok"] and data["heartbeat_count"] >= 2 and data["heartbeat_errors"] == []
    assert cli.j("handoff", "show", handoff_id)["heartbeat_count"] >= 2


def test_run_checks_before_accepting(cli: Cli, sent: Handoff, tmp_path: Path) -> None:
    cli.ok("agent", "add", "ghost-bin", "--type", "command", "--command", "definitely-not-a-binary-xyz --flag", "--source-id", SOURCE)
    handoff_id = _send(cli, sent, "ghost-bin")
    assert cli.refused("handoff", "run", "ghost-bin")["message"] == (
        "invalid input: executable 'definitely-not-a-binary-xyz' was not found; install it or fix the agent profile"
    )
    cli.ok("agent", "add", "codex-x", "--type", "codex", "--binary", str(tmp_path / "no-codex"), "--source-id", SOURCE)
    assert "was not found" in cli.refused("handoff", "run", "codex-x")["message"]
    assert cli.j("handoff", "show", handoff_id)["status"] == "pending"
    assert cli.refused("handoff", "run", "ghost-bin", handoff_id, "--next")["message"] == "invalid input: pass either HANDOFF_ID or --next, not both"
    assert cli.refused("handoff", "run", "ghost-bin", "--timeout", "0")["message"] == "invalid input: --timeout must be greater than zero seconds"
    assert cli.refused("handoff", "run", "ghost-bin", "--workspace", str(tmp_path / "nope"))["code"] == "invalid_input"
    assert cli.refused("handoff", "run", "nobody")["message"].startswith('invalid input: agent "nobody" is not connected')


def test_run_of_someone_elses_assignment_is_refused(cli: Cli, sent: Handoff) -> None:
    _command_agent(cli, "bot", "print('x')")
    assert cli.refused("handoff", "run", "bot", sent.handoff_id)["message"] == (
        f"invalid input: handoff {sent.handoff_id} is assigned to {RECEIVER}, not bot"
    )


def test_codex_and_claude_adapters_pass_the_packet_home_and_model(cli: Cli, sent: Handoff, tmp_path: Path) -> None:
    # Stand-in vendor binaries: they report their argv, their config home and the prompt's first line.
    for agent, home_var in (("codex", "CODEX_HOME"), ("claude", "CLAUDE_CONFIG_DIR")):
        fake = tmp_path / f"fake-{agent}"
        fake.write_text(
            f"#!{sys.executable}\n"
            "import os, sys\n"
            f"print('argv=' + ' '.join(sys.argv[1:]), 'home=' + os.environ.get({home_var!r}, '-'),"
            " 'secret=' + os.environ.get('BENCH_SECRET', '-'), 'first=' + sys.stdin.readline().strip())\n"
        )
        fake.chmod(0o755)
        home = tmp_path / f"{agent}-home"
        home.mkdir()
        alias = f"{agent}-bot"
        cli.ok("agent", "add", alias, "--type", agent, "--binary", str(fake), "--home", str(home), "--model", "m-1",
               "--workspace", str(sent.workspace), "--source-id", SOURCE)
        handoff_id = _send(cli, sent, alias)
        data = cli.j("handoff", "run", alias, env={"BENCH_SECRET": "leak"})
        assert data["ok"] and data["handoff_id"] == handoff_id
        expected_argv = "exec --sandbox workspace-write --model m-1 -" if agent == "codex" else "-p --permission-mode acceptEdits --model m-1"
        assert f"argv={expected_argv} home={home} secret=- first=# AideMemo Agent Handoff" in data["result"]
    # env_policy core passes only named variables; `all` passes the caller's environment.
    cli.ok("agent", "add", "codex-bot", "--type", "codex", "--binary", str(tmp_path / "fake-codex"), "--source-id", SOURCE,
           "--pass-env", "BENCH_SECRET")
    _send(cli, sent, "codex-bot")
    assert "secret=leak" in cli.j("handoff", "run", "codex-bot", env={"BENCH_SECRET": "leak"})["result"]


def test_a_worker_that_returns_its_own_evidence_keeps_it(cli: Cli, sent: Handoff) -> None:
    # The command records its own fact and returns it through the CLI, as an agent would.
    code = (
        "import json, os, subprocess, sys\n"
        "cli = [sys.executable, '-m', 'aidememo_ref._cli.local', '--json']\n"
        "fact = json.loads(subprocess.run([*cli, 'fact', 'add', 'worker wrote this'], check=True, capture_output=True, text=True).stdout)\n"
        "subprocess.run([*cli, 'handoff', 'heartbeat', os.environ['AIDEMEMO_HANDOFF_ID']], check=True, capture_output=True)\n"
        "subprocess.run([*cli, 'handoff', 'return', '--outcome', 'succeeded', '--result-fact-id', fact['fact_id'],"
        " os.environ['AIDEMEMO_HANDOFF_ID']], check=True, capture_output=True)\n"
        "print('done')\n"
    )
    _command_agent(cli, "self-returner", code, "--env-policy", "all")
    handoff_id = _send(cli, sent, "self-returner")
    data = cli.j("handoff", "run", "self-returner")
    record = cli.j("handoff", "show", handoff_id)
    assert data["ok"] and data["status"] == "completed" and data["result_fact_id"] == record["result_fact_id"]
    assert record["heartbeat_count"] == 1
    fact = cli.j("fact", "get", record["result_fact_id"])
    assert (fact["content"], fact["actor_id"], fact["source_id"]) == ("worker wrote this", "self-returner", SOURCE)
    assert sent.session_id in fact["entities"]
