"""`agent add|list|show|remove` (no credentials, ever) and `config set|unset|list`."""

from __future__ import annotations

from pathlib import Path

from .conftest import Cli

# Upstream's InstallationConfig fields: paths and routing only; no token, key or password field exists.
PROFILE_KEYS = ["agent", "binary", "config_home", "workspace", "source_id", "model", "env_policy", "pass_env"]


def test_agent_add_list_show_update_remove(cli: Cli, tmp_path: Path) -> None:
    home = tmp_path / "codex-two-home"
    home.mkdir()
    added = cli.j("agent", "add", "codex-two", "--type", "codex", "--home", str(home), "--workspace", str(tmp_path),
                  "--source-id", "team", "--model", "m1", "--binary", "/opt/codex", "--pass-env", "OPENAI_BASE_URL",
                  "--pass-env", "OPENAI_BASE_URL")
    assert list(added) == ["alias", "installation", "replaced"] and added["replaced"] is False
    profile = added["installation"]
    assert sorted(profile) == sorted(PROFILE_KEYS)
    assert (profile["config_home"], profile["workspace"], profile["pass_env"]) == (str(home), str(tmp_path),
                                                                                   ["OPENAI_BASE_URL"])
    assert cli.ok("agent", "add", "codex-two", "--type", "Claude").out == "Updated agent profile codex-two (claude)\n"
    assert cli.j("agent", "show", "codex-two") == {"alias": "codex-two",
                                                   "installation": {"agent": "claude", "env_policy": "core"}}
    assert cli.ok("installation", "add", "bot", "--agent", "command", "--command", "echo hi").out == (
        "Added agent profile bot (command)\n")
    listed = cli.j("agent", "list")  # upstream: a map from alias to profile
    assert listed == {"bot": {"agent": "command", "env_policy": "core", "command": "echo hi"},
                      "codex-two": {"agent": "claude", "env_policy": "core"}}
    assert cli.ok("agent", "list").out == "bot agent=command source=- workspace=-\ncodex-two agent=claude source=- workspace=-\n"
    assert cli.ok("installation", "show", "bot").out == 'alias = "bot"\nagent = "command"\nenv_policy = "core"\ncommand = "echo hi"\n\n'  # the TOML body, then println
    assert cli.ok("agent", "remove", "bot").out == "Removed agent profile bot\n"
    assert cli.ok("--json", "agent", "remove", "codex-two").out == '{"alias":"codex-two","removed":true}\n'
    assert cli.ok("agent", "list").out == "(no connected agent profiles)\n"


def test_agent_refusals(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert cli.refused("agent", "add", "a", "--type", "codex", "--home", str(missing)) == (
        f"invalid input: --config-home must name an existing directory: {missing}")
    assert cli.refused("agent", "add", "a", "--type", "codex", "--workspace", str(missing)) == (
        f"invalid input: --workspace must name an existing directory: {missing}")
    assert cli.refused("agent", "add", "a b", "--type", "manual") == (
        "invalid input: installation alias must use letters, digits, '.', '-', or '_'")
    # Upstream has no hermes adapter: Hermes is a route label, a Kanban owner or a remote actor.
    assert cli.refused("agent", "add", "a", "--type", "hermes") == "invalid input: --agent must be codex, claude, or manual"
    assert cli.refused("agent", "add", "a", "--type", "command") == (
        "invalid input: --command goes with --type command, and --type command needs --command")
    assert cli.refused("agent", "add", "a", "--type", "codex", "--pass-env", "TOKEN=abc") == (
        'invalid input: --pass-env expects an environment variable name, got "TOKEN=abc"')
    assert cli.refused("agent", "add", "a", "--type", "codex", "--env-policy", "some") == (
        "invalid input: --env-policy must be core or all")
    assert cli.refused("agent", "show", "ghost") == 'invalid input: agent profile "ghost" not found'
    assert cli.refused("agent", "remove", "ghost") == 'invalid input: agent profile "ghost" not found'


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
    assert cli.refused("config", "set", "source_from_hermes", "tenant") == (
        "invalid input: config set: source_from_hermes must be none, board or board_tenant"
    )
    assert cli.refused("config", "set", "token", "x").startswith("aidememo-ref config set: argument key: invalid choice")
