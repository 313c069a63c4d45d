"""``config set|unset|list``: this kit's stored settings (the opt-in Hermes scope mapping and a
default ``source_id``). Upstream's ``config`` edits its ``config.toml``; this group is the
kit's own (docs/local.md)."""

from __future__ import annotations

import argparse

from aidememo_cli._local._scope import SETTING_KEYS, parse_setting

from ._context import Context, Parser, add_command, add_group


def cmd_set(args: argparse.Namespace, ctx: Context) -> int:
    value = parse_setting(args.key, args.value, "config set")
    with ctx.store(write=True) as store:
        store.set_setting(args.key, value)
    ctx.emit({"key": args.key, "value": value}, f"Set {args.key} = {value}")
    return 0


def cmd_unset(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=True) as store:
        store.set_setting(args.key, None)
    ctx.emit({"key": args.key, "value": None}, f"Unset {args.key}")
    return 0


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        stored = store.settings()
        effective = ctx.settings(store)
    shown = {"source_id": effective.source_id, "source_from_hermes": str(effective.source_from_hermes),
             "actor_from_hermes_profile": effective.actor_from_hermes_profile}
    ctx.emit({"stored": stored, "effective": shown}, "\n".join(f"{k} = {v}" for k, v in shown.items()))
    return 0


COMMANDS = ('set', 'unset', 'list')


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    config = add_group(groups, "config", "kit settings (source_id, Hermes mapping)")
    p = add_command(config, "set", cmd_set, "store a setting")
    p.add_argument("key", choices=list(SETTING_KEYS))
    p.add_argument("value")
    p = add_command(config, "unset", cmd_unset, "remove a stored setting")
    p.add_argument("key", choices=list(SETTING_KEYS))
    add_command(config, "list", cmd_list, "stored and effective settings")
