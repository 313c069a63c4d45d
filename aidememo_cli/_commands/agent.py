"""``agent add|list|show|remove`` and its upstream twin ``installation`` (``--agent``,
``--config-home``). Profiles hold paths and routing metadata, never credentials."""

from __future__ import annotations

import argparse
import re

from aidememo_cli._local._errors import invalid_input
from aidememo_cli._local._records import AgentProfile, AgentType, EnvPolicy

from ._context import Context, Parser, add_command, add_group, clean, dumps, require_dir

_ALIAS = re.compile(r"[A-Za-z0-9._-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _alias(value: str) -> str:
    alias = value.strip()
    if not _ALIAS.fullmatch(alias):
        raise invalid_input("installation alias must use letters, digits, '.', '-', or '_'")
    return alias


def cmd_add(args: argparse.Namespace, ctx: Context) -> int:
    alias = _alias(args.alias)
    agent = args.agent.strip().lower()
    if agent not in {str(t) for t in AgentType}:
        raise invalid_input("--agent must be codex, claude, or manual")
    command = clean(args.command)
    if (agent == AgentType.COMMAND) != (command is not None):
        raise invalid_input("--command goes with --type command, and --type command needs --command")
    home = require_dir("--config-home", clean(args.home))
    workspace = require_dir("--workspace", clean(args.workspace))
    pass_env: list[str] = []
    for raw in args.pass_env:
        name = raw.strip()
        if not _ENV_NAME.fullmatch(name):
            raise invalid_input(f"--pass-env expects an environment variable name, got {json_str(name)}")
        if name not in pass_env:
            pass_env.append(name)
    policy = args.env_policy.strip().lower()
    if policy not in {str(p) for p in EnvPolicy}:
        raise invalid_input("--env-policy must be core or all")
    profile = AgentProfile(alias=alias, agent=AgentType(agent), binary=clean(args.binary), config_home=home,
                           workspace=workspace, source_id=clean(args.source_id), model=clean(args.model),
                           env_policy=EnvPolicy(policy), pass_env=tuple(pass_env), command=command)
    with ctx.store(write=True) as store:
        replaced = store.put_agent(profile)
    ctx.emit({"alias": alias, "replaced": replaced, "installation": profile.to_json()},
             f"{'Updated' if replaced else 'Added'} agent profile {alias} ({profile.agent})")
    return 0


def json_str(text: str) -> str:
    """Rust's ``{:?}`` of a string: double quotes, escapes."""
    return dumps(text, sort=False, pretty=False)


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        profiles = store.list_agents()
    if ctx.as_json:
        ctx.out(dumps({p.alias: p.to_json() for p in profiles}, sort=False))
    elif not profiles:
        ctx.out("(no connected agent profiles)")
    else:
        ctx.out("\n".join(f"{p.alias} agent={p.agent} source={p.source_id or '-'} workspace={p.workspace or '-'}"
                          for p in profiles))
    return 0


def _get(ctx: Context, alias: str) -> AgentProfile:
    with ctx.store(write=False) as store:
        profile = store.get_agent(alias)
    if profile is None:
        raise invalid_input(f"agent profile {json_str(alias)} not found")
    return profile


def _toml_value(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(json_str(str(item)) for item in value) + "]"
    return json_str(str(value))


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    alias = _alias(args.alias)
    profile = _get(ctx, alias)
    body = "".join(f"{key} = {_toml_value(value)}\n" for key, value in profile.to_json().items())
    ctx.emit({"alias": alias, "installation": profile.to_json()}, f"alias = {json_str(alias)}\n{body}")
    return 0


def cmd_remove(args: argparse.Namespace, ctx: Context) -> int:
    alias = _alias(args.alias)
    with ctx.store(write=True) as store:
        if not store.remove_agent(alias):
            raise invalid_input(f"agent profile {json_str(alias)} not found")
    ctx.out(dumps({"alias": alias, "removed": True}, sort=True, pretty=False) if ctx.as_json
            else f"Removed agent profile {alias}")
    return 0


def _register(groups: argparse._SubParsersAction[Parser], group: str, agent_flag: str, home_flag: str,
              help_text: str) -> None:
    sub = add_group(groups, group, help_text)
    p = add_command(sub, "add", cmd_add, "add or replace an agent profile")
    p.add_argument(f"--{agent_flag}", dest="agent", required=True, metavar="AGENT",
                   help="codex, claude or manual (or this kit's command)")
    p.add_argument("--binary", metavar="PATH")
    p.add_argument(f"--{home_flag}", dest="home", metavar="PATH")
    p.add_argument("--workspace", metavar="PATH")
    p.add_argument("--source-id")
    p.add_argument("--model")
    p.add_argument("--env-policy", default="core", metavar="POLICY")
    p.add_argument("--pass-env", action="append", default=[], metavar="NAME")
    p.add_argument("--command", help="command line for --type command (kit extension; packet on stdin)")
    p.add_argument("alias", metavar="ALIAS")
    add_command(sub, "list", cmd_list, "list agent profiles")
    for name, func in (("show", cmd_show), ("remove", cmd_remove)):
        p = add_command(sub, name, func, f"{name} one agent profile")
        p.add_argument("alias", metavar="ALIAS")


COMMANDS = ('add', 'list', 'show', 'remove')


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    _register(groups, "agent", "type", "home", "connect coding-agent accounts (no credentials)")


def register_installation(groups: argparse._SubParsersAction[Parser]) -> None:
    _register(groups, "installation", "agent", "config-home", "coding-agent runtime profiles (no credentials)")
