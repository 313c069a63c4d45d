"""Stdio MCP with a remote profile, installed by mcp-install: upstream's round trip through the tools."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.remote.conftest import SOURCE, World


def _request(index: int, name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": index, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}})


def _results(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        result = json.loads(line)["result"]
        text = result["content"][0]["text"]
        out.append({"error": json.loads(text)} if result.get("isError") else json.loads(text))
    return out


def _mcp(world: World, account: str, calls: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch,
         *, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One in-process stdio session of ``mcp --remote-profile ACCOUNT`` with the installed environment."""
    lines = "\n".join(_request(i, name, args) for i, (name, args) in enumerate(calls)) + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    pinned = {"AIDEMEMO_ACTOR_ID": account, "AIDEMEMO_SOURCE_ID": SOURCE, **(env or {})}
    return _results(world.ok(account, "mcp", "--remote-profile", account, env=pinned).out)


def _installed(config_home: Path) -> dict[str, Any]:
    entry: dict[str, Any] = tomllib.loads((config_home / "config.toml").read_text())["mcp_servers"]["aidememo"]
    return entry


def test_mcp_install_pins_the_bearer_actor_per_codex_home(world: World) -> None:
    p1_home, p2_home = world.root / "codex-p1-home", world.root / "codex-p2-home"
    assert "cannot be combined with --actor-id" in world.refused(
        "codex-p1", "mcp-install", "--target", "codex", "--codex-home", str(p1_home), "--remote-profile", "codex-p1",
        "--actor-id", "codex-p2")
    assert "one --remote-profile per Codex home" in world.refused(
        "codex-p1", "mcp-install", "--target", "codex", "--codex-home", str(p1_home), "--codex-home", str(p2_home),
        "--remote-profile", "codex-p1")
    for account, home in (("codex-p1", p1_home), ("codex-p2", p2_home)):
        report = world.j(account, "mcp-install", "--target", "codex", "--codex-home", str(home), "--source-id", SOURCE,
                         "--remote-profile", account)
        assert (report["actor_id"], report["remote_profile"], report["verified"]) == (account, account, True)
        entry = _installed(home)
        assert entry["env"] == {"AIDEMEMO_SOURCE_ID": SOURCE, "AIDEMEMO_ACTOR_ID": account}
        assert entry["args"] == ["--backend", "sqlite", "--store", world.store(account), "mcp", "--remote-profile",
                                 account]
        assert os.path.basename(entry["command"]) == "aidememo-ref"
    assert "already exists" in world.refused("codex-p1", "mcp-install", "--target", "codex", "--codex-home",
                                             str(p1_home), "--remote-profile", "codex-p1")
    assert world.j("codex-p1", "mcp-install", "--target", "codex", "--codex-home", str(p1_home), "--remote-profile",
                   "codex-p1", "--force")["overwrote"] is True


def test_print_mode_shows_the_shell_out_and_changes_nothing(world: World) -> None:
    text = world.ok("codex-p2", "mcp-install", "--target", "claude", "--remote-profile", "codex-p2", "--print").out
    lines = text.splitlines()
    assert lines[0] == "Would run aidememo MCP server for claude (shell-out)"
    assert lines[1].startswith("  claude mcp add aidememo -e AIDEMEMO_ACTOR_ID=codex-p2 -- ")
    assert lines[1].endswith(f"--backend sqlite --store {world.store('codex-p2')} mcp --remote-profile codex-p2")
    report = world.j("codex-p2", "mcp-install", "--target", "cursor", "--print", "--remote-profile", "codex-p2")
    assert list(report) == ["target", "method", "detail", "overwrote", "actor_id", "remote_profile",
                            "storage_backend", "store_path"]
    assert not (world.home / ".cursor").exists()
    assert "unknown target `vim`" in world.refused(None, "mcp-install", "--target", "vim")


def test_the_installed_server_runs_the_remote_round_trip(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    for account in ("codex-p1", "codex-p2"):
        world.ok(account, "mcp-install", "--target", "codex", "--codex-home", str(world.root / account),
                 "--source-id", SOURCE, "--remote-profile", account)
    session_id = world.session(topic="Remote MCP profile round trip")
    (sent,) = _mcp(world, "codex-p1", [("aidememo_handoff", {
        "dispatch": True, "session_id": session_id, "source_id": SOURCE, "to_actor": "codex-p2",
        "focus": "Verify installed remote MCP routing"})], monkeypatch)
    assert (sent["actor_id"], sent["dispatched"], sent["remote_profile"]) == ("codex-p1", True, "codex-p1")
    handoff_id = sent["handoff_id"]

    # codex-p2's installed entry, run as the agent would run it: a child process with its env.
    entry = _installed(world.root / "codex-p2")
    inbox_accept = "\n".join([_request(1, "aidememo_handoff_inbox", {"action": "list"}),
                              _request(2, "aidememo_handoff_inbox", {"action": "accept", "handoff_id": handoff_id}),
                              _request(3, "aidememo_fact_add", {"content": "Installed remote MCP round trip passed",
                                                                "entities": ["RemoteMcpReview"], "fact_type": "note",
                                                                "session_id": session_id})]) + "\n"
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    done = subprocess.run([entry["command"], *entry["args"]], input=inbox_accept, capture_output=True, text=True,
                          env={**child_env, **entry["env"], "HOME": str(world.home)}, timeout=120, check=True)
    listed, accepted, fact = _results(done.stdout)
    assert [e["record"]["handoff_id"] for e in listed["assignments"]] == [handoff_id]
    assert accepted["remote_profile"] == "codex-p2" and accepted["recovered"] is False
    assert fact["actor_id"] == "codex-p2" and fact["source_id"] == SOURCE

    returned, again = _mcp(world, "codex-p2", [
        ("aidememo_handoff_inbox", {"action": "return", "handoff_id": handoff_id, "outcome": "succeeded",
                                    "result_fact_id": fact["id"]}),
        ("aidememo_handoff_inbox", {"action": "return", "handoff_id": handoff_id, "outcome": "succeeded",
                                    "result_fact_id": fact["id"]})], monkeypatch)
    assert returned["outcome"] == "succeeded" and returned["recovered"] is False and again["recovered"] is True
    (outbox,) = _mcp(world, "codex-p1", [("aidememo_handoff_inbox", {"action": "outbox"})], monkeypatch)
    assert outbox["assignments"][0]["record"]["result_fact_id"] == fact["id"]
    assert world.commits(handoff_id) == 3


def test_remote_mcp_refuses_identity_overrides_and_local_only_actions(world: World,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    handoff_id = world.send(world.session())["handoff_id"]
    answers = _mcp(world, "codex-p2", [
        ("aidememo_handoff_inbox", {"action": "show", "handoff_id": handoff_id, "actor_id": "codex-p1"}),
        ("aidememo_handoff_inbox", {"action": "list", "actor_id": "codex-p1"}),
        ("aidememo_handoff_inbox", {"action": "accept", "handoff_id": handoff_id, "claim_id": "mine"}),
        ("aidememo_handoff_inbox", {"action": "heartbeat", "handoff_id": handoff_id}),
        ("aidememo_handoff", {"dispatch": True, "to_actor": "codex-p1", "from_actor": "codex-p2"}),
        ("aidememo_handoff_inbox", {"action": "reopen"}),
        ("aidememo_handoff_inbox", {"action": "status", "actor_id": "codex-p1"}),
        ("aidememo_handoff_inbox", {"action": "return", "handoff_id": handoff_id, "result_fact_id": "f"}),
        ("aidememo_handoff_inbox", {"action": "return", "handoff_id": handoff_id, "outcome": "succeeded"}),
    ], monkeypatch)
    messages = [answer["error"]["message"] for answer in answers]
    assert messages == [
        "actor_id cannot override actor identity for a remote profile",
        "invalid input: --actor-id/--from cannot override actor identity for a remote profile",
        "claim_id cannot override the generated claim for a remote profile",
        'remote profiles do not support handoff inbox action "heartbeat"',
        "invalid input: --actor-id/--from cannot override actor identity for a remote profile",
        'unknown handoff inbox action "reopen"; expected list, outbox, show, status, accept, or return',
        "handoff_id required for action=status",  # the arguments are judged before the actor override
        "outcome required for action=return",
        "result_fact_id required for action=return",
    ]
    assert world.commits(handoff_id) == 1


def test_the_server_starts_only_for_the_bearer_actor(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert world.refused("codex-p2", "mcp", "--remote-profile", "codex-p2", env={"AIDEMEMO_ACTOR_ID": "codex-p1"}) == (
        'invalid input: AIDEMEMO_ACTOR_ID "codex-p1" does not match remote profile actor "codex-p2"')
    assert "remote MCP requires AIDEMEMO_ACTOR_ID" in world.refused("codex-p2", "mcp", "--remote-profile", "codex-p2")
