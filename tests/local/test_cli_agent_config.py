"""`agent add|list|show|remove` (no credentials, ever) and `config set|unset|list`."""

from __future__ import annotations

from pathlib import Path

from .conftest import Cli

PROFILE_KEYS = {"alias", "agent", "binary", "config_home", "workspace", "source_id", "model", "env_policy", "pass_env", "command"}


def test_agent_add_list_show_update_remove(cli: Cli, tmp_path: Path) -> None:
    home = tmp_path / "codex-two-home"
    home.mkdir()
    added = cli.j(
        "agent", "add", "codex-two", "--type", "codex", "--home", str(home), "--workspace", str(tmp_path),
        "--source-id", "team", "--model", "m1", "--pass-env", "OPENAI_BASE_URL",
    )
    assert added["replaced"] is False and added["alias"] == "codex-two"
    profile = added["installation"]
    assert set(profile) == PROFILE_KEYS  # paths and routing only: no token, key or password field exists
    assert (profile["config_home"], profile["workspace"], profile["pass_env"]) == (str(home), str(tmp_path), ["OPENAI_BASE_URL"])
    assert cli.ok("agent", "add", "codex-two", "--type", "claude").out.strip() == "Updated agent profile codex-two (claude)"
    assert cli.ok("agent", "add", "bot", "--type", "command", "--command", "echo hi").out.strip() == "Added agent profile bot (command)"
    listed = cli.j("agent", "list")["agents"]
    assert [p["alias"] for p in listed] == ["bot", "codex-two"]
    assert cli.ok("agent", "list").out.splitlines()[0] == "2 agent profile(s):"
    shown = cli.j("agent", "show", "bot")
    assert shown["command"] == "echo hi" and shown["agent"] == "command"
    assert "agent: command" in cli.ok("agent", "show", "bot").out
    assert cli.ok("agent", "remove", "bot").out.strip() == "Removed agent profile bot"
    assert cli.j("agent", "remove", "codex-two") == {"alias": "codex-two", "removed": True}
    assert cli.ok("agent", "list").out.strip() == "(no agent profiles)"


def test_agent_refusals(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert cli.refused("agent", "add", "a", "--type", "codex", "--home", str(missing))["message"] == (
        f"invalid input: --home {missing} is not a directory"
    )
    assert cli.refused("agent", "add", "a", "--type", "codex", "--workspace", str(missing))["code"] == "invalid_input"
    assert "must use only ASCII letters" in cli.refused("agent", "add", "a b", "--type", "manual")["message"]
    assert cli.refused("agent", "add", "a", "--type", "command")["message"] == (
        "invalid input: a command agent needs --command with the command line to run"
    )
    assert cli.refused("agent", "add", "a", "--type", "codex", "--command", "x")["message"] == "invalid input: --command is only for --type command"
    assert cli.refused("agent", "add", "a", "--type", "codex", "--pass-env", "TOKEN=abc")["message"] == (
        "invalid input: --pass-env takes a variable name, not 'TOKEN=abc'"
    )
    usage = cli.run("agent", "add", "a", "--type", "hermes")
    assert usage.rc == 2 and "invalid choice: 'hermes'" in usage.err
    not_connected = 'invalid input: agent "ghost" is not connected; add it with `aidememo-ref agent add ghost --type codex`'
    assert cli.refused("agent", "show", "ghost")["message"] == not_connected
    assert cli.refused("agent", "remove", "ghost")["message"] == not_connected


def test_config_settings_round_trip_and_refusals(cli: Cli) -> None:
    assert cli.j("config", "set", "source_from_hermes", "board_tenant") == {"key": "source_from_hermes", "value": "board_tenant"}
    cli.ok("config", "set", "actor_from_hermes_profile", "true")
    data = cli.j("config", "list")
    assert data["stored"] == {"source_from_hermes": "board_tenant", "actor_from_hermes_profile": "true"}
    assert data["effective"] == {"source_id": None, "source_from_hermes": "board_tenant", "actor_from_hermes_profile": True}
    env_wins = cli.j("config", "list", env={"AIDEMEMO_SOURCE_FROM_HERMES": "none"})["effective"]
    assert env_wins["source_from_hermes"] == "none"
    cli.ok("config", "unset", "source_from_hermes")
    assert cli.j("config", "list")["effective"]["source_from_hermes"] == "none"
    assert cli.refused("config", "set", "source_from_hermes", "tenant")["message"] == (
        "invalid input: config set: source_from_hermes must be none, board or board_tenant"
    )
    assert cli.run("config", "set", "token", "x").rc == 2
