"""``mcp-install --target T [--remote-profile NAME] [--print] …``: register the stdio MCP server with an agent.

Upstream's targets, flags, refusals and report (``cmd/mcp_install.rs``): ``claude``, ``hermes`` and
``openclaw`` by running the agent's own CLI, ``codex``, ``cursor`` and ``opencode`` by editing
their config files. With ``--remote-profile`` the bearer's actor is asked of the server and
pinned as ``AIDEMEMO_ACTOR_ID``, so the installed server refuses to start for another actor; one
profile per Codex home, never an explicit ``--actor-id`` beside it. The entry runs this kit's
``aidememo-ref`` by its absolute path (upstream writes the bare name ``aidememo``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aidememo_cli._local._errors import LocalError, LocalErrorCode, invalid_input

from ._context import Context, Parser, dumps

__all__ = ["register"]

SERVER = "aidememo"  # the entry's name in every agent's config, as upstream's
SUPPORTED = (
    ("claude", "shell-out", "claude mcp add aidememo [-e KEY=VALUE ...] -- aidememo-ref --backend <resolved>"
                            " --store <path> mcp"),
    ("hermes", "shell-out", "hermes mcp add aidememo --command aidememo-ref [--env KEY=VALUE ...] --args --backend"
                            " <resolved> --store <path> mcp"),
    ("openclaw", "shell-out", "openclaw mcp set aidememo '{\"command\":\"aidememo-ref\",\"args\":[\"--backend\","
                              "\"<resolved>\",\"mcp\"]}'"),
    ("codex", "file-edit", "edit ~/.codex/config.toml: add [mcp_servers.aidememo]"),
    ("cursor", "file-edit", "edit ~/.cursor/mcp.json: add mcpServers.aidememo"),
    ("opencode", "file-edit", "edit ~/.config/opencode/opencode.json: add mcp.aidememo"),
)


def _internal(detail: str) -> LocalError:
    return LocalError(LocalErrorCode.INTERNAL, detail)


@dataclass(slots=True, kw_only=True)
class _Plan:
    """Everything every target needs: what to run and what to pin."""

    program: str
    backend: str
    store: str
    source_id: str | None
    actor_ids: list[str]
    remote_profile: str | None
    force: bool
    print_only: bool
    no_verify: bool
    home: str

    @property
    def actor_id(self) -> str | None:
        return self.actor_ids[0] if self.actor_ids else None

    def args(self) -> list[str]:
        out = ["--backend", self.backend, "--store", self.store, "mcp"]
        if self.remote_profile is not None:
            out += ["--remote-profile", self.remote_profile]
        return out

    def env(self, actor_id: str | None) -> list[tuple[str, str]]:
        env = []
        if self.source_id is not None:
            env.append(("AIDEMEMO_SOURCE_ID", self.source_id))
        if actor_id is not None:
            env.append(("AIDEMEMO_ACTOR_ID", actor_id))
        return env

    def report(self, target: str, method: str, detail: str, *, overwrote: bool, verified: bool | None,
               actor_id: str | None = None) -> dict[str, Any]:
        # Upstream's struct order; absent optional fields are left out (skip_serializing_if).
        report: dict[str, Any] = {"target": target, "method": method, "detail": detail, "overwrote": overwrote}
        for key, value in (("source_id", self.source_id), ("actor_id", actor_id or self.actor_id),
                           ("remote_profile", self.remote_profile)):
            if value is not None:
                report[key] = value
        report |= {"storage_backend": self.backend, "store_path": self.store}
        if verified is not None:
            report["verified"] = verified
        return report


# -- shell-out targets ------------------------------------------------------------------------------
def _shell_args(target: str, plan: _Plan) -> list[str]:
    env = plan.env(plan.actor_id)
    if target == "claude":
        # Claude Code binds -e to the server only when the name comes first.
        return ["mcp", "add", SERVER, *[item for k, v in env for item in ("-e", f"{k}={v}")], "--", plan.program,
                *plan.args()]
    if target == "hermes":
        # Hermes takes --args as argparse.REMAINDER: it must come last.
        return ["mcp", "add", SERVER, "--command", plan.program, *(["--env"] if env else []),
                *[f"{k}={v}" for k, v in env], "--args", *plan.args()]
    payload: dict[str, Any] = {"command": plan.program, "args": plan.args()}
    if env:
        payload["env"] = dict(env)
    return ["mcp", "set", SERVER, json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)]


def _mentions(output: str, token: str) -> bool:
    """``aidememo`` as a whole word on some line (not ``uvx-aidememo-x``)."""
    word = []
    for line in output.splitlines():
        for ch in line + "\n":
            if ch.isalnum() or ch in "-_":
                word.append(ch)
            else:
                if "".join(word) == token:
                    return True
                word = []
    return False


def _verify(program: str) -> bool | None:
    try:
        done = subprocess.run([program, "mcp", "list"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _mentions(done.stdout, SERVER) if done.returncode == 0 else None


def _shell_out(target: str, plan: _Plan) -> dict[str, Any]:
    args = _shell_args(target, plan)
    cmdline = " ".join([target, *args])
    if plan.print_only:
        return plan.report(target, "shell-out", cmdline, overwrote=False, verified=None)
    answer = (b"y\n\n" if plan.force else b"\n") if target == "hermes" else None  # Hermes asks before saving
    try:
        done = subprocess.run([target, *args], input=answer, capture_output=True, timeout=300, check=False)
    except OSError as exc:
        raise invalid_input(f"could not run `{target}` — is the {target} CLI on your PATH? (raw error: {exc})") from None
    except subprocess.TimeoutExpired:
        raise _internal(f"`{cmdline}` did not finish in 300 s") from None
    if done.returncode != 0:
        raise _internal(f"`{cmdline}` exited with exit status: {done.returncode}: "
                        f"{done.stderr.decode('utf-8', 'replace').strip()}")
    if target == "hermes" and "Cancelled." in done.stdout.decode("utf-8", "replace"):
        raise invalid_input("Hermes already has an `aidememo` MCP server; rerun with --force to overwrite it")
    return plan.report(target, "shell-out", cmdline, overwrote=False, verified=None if plan.no_verify else _verify(target))


# -- file-edit targets ----------------------------------------------------------------------------
def _write_atomically(path: str, contents: str) -> None:
    temporary = os.path.splitext(path)[0] + ".tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(contents)
        os.replace(temporary, path)
    except OSError as exc:
        raise _internal(f"write {path}: {exc.strerror}") from exc


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise _internal(f"read {path}: {exc}") from exc


def _codex(plan: _Plan, homes: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    import tomllib

    import tomli_w

    roots = list(homes) or [env.get("CODEX_HOME") or os.path.join(plan.home, ".codex")]
    paths = [os.path.join(os.path.abspath(os.path.expanduser(root)), "config.toml") for root in roots]
    if len(plan.actor_ids) > 1 and len(plan.actor_ids) != len(paths):
        raise invalid_input(f"received {len(plan.actor_ids)} --actor-id values for {len(paths)} Codex profiles; pass"
                            " one shared actor id or one per --codex-home")
    shown_actors = ",".join(plan.actor_ids) or None
    detail = f"{', '.join(paths)} ([mcp_servers.aidememo] store={plan.store})"
    if plan.source_id is not None:
        detail += f" env.AIDEMEMO_SOURCE_ID={plan.source_id}"
    if shown_actors is not None:
        detail += f" actor_ids={shown_actors}"
    if plan.remote_profile is not None:
        detail += f" remote_profile={plan.remote_profile}"
    if plan.print_only:
        return plan.report("codex", "file-edit", detail, overwrote=False, verified=None, actor_id=shown_actors)
    overwrote = False
    for index, path in enumerate(paths):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        existing = _read(path)
        try:
            document: dict[str, Any] = tomllib.loads(existing) if existing.strip() else {}
        except tomllib.TOMLDecodeError as exc:
            raise _internal(f"parse {path}: {exc}") from None
        servers = document.setdefault("mcp_servers", {})
        if not isinstance(servers, dict):
            raise _internal("mcp_servers must be a TOML table")
        if SERVER in servers and not plan.force:
            raise invalid_input(f"[mcp_servers.aidememo] already exists in {path} — pass --force to overwrite")
        overwrote |= SERVER in servers
        actor = plan.actor_ids[0] if len(plan.actor_ids) == 1 else (plan.actor_ids[index] if plan.actor_ids else None)
        entry: dict[str, Any] = {"command": plan.program, "args": plan.args()}
        if pinned := plan.env(actor):
            entry["env"] = dict(pinned)
        servers[SERVER] = entry
        _write_atomically(path, tomli_w.dumps(document))
    return plan.report("codex", "file-edit", detail, overwrote=overwrote, verified=True, actor_id=shown_actors)


def _json_file(target: str, plan: _Plan) -> dict[str, Any]:
    if target == "cursor":
        path, key = os.path.join(plan.home, ".cursor", "mcp.json"), "mcpServers"
        fresh: dict[str, Any] = {}
    else:
        path, key = os.path.join(plan.home, ".config", "opencode", "opencode.json"), "mcp"
        fresh = {"$schema": "https://opencode.ai/config.json"}
    detail = f"{path} ({key}.aidememo)"
    for label, value in (("env.AIDEMEMO_SOURCE_ID", plan.source_id), ("env.AIDEMEMO_ACTOR_ID", plan.actor_id),
                         ("remote_profile", plan.remote_profile)):
        if value is not None:
            detail += f" {label}={value}"
    if plan.print_only:
        return plan.report(target, "file-edit", detail, overwrote=False, verified=None)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    existing = _read(path)
    try:
        document: Any = json.loads(existing) if existing.strip() else fresh
    except ValueError as exc:
        raise _internal(f"parse {path}: {exc}") from None
    if not isinstance(document, dict):
        raise _internal(f"{path} is not a JSON object")
    servers = document.setdefault(key, {})
    if not isinstance(servers, dict):
        raise _internal(f"{key} must be a JSON object")
    already = SERVER in servers
    if already and not plan.force:
        raise invalid_input(f"{key}.aidememo already exists in {path} — pass --force to overwrite")
    entry: dict[str, Any] = ({"command": plan.program, "args": plan.args()} if target == "cursor" else
                             {"type": "local", "command": [plan.program, *plan.args()], "enabled": True})
    if pinned := plan.env(plan.actor_id):
        entry["env"] = dict(pinned)
    servers[SERVER] = entry
    _write_atomically(path, json.dumps(document, indent=2, ensure_ascii=False))
    return plan.report(target, "file-edit", detail, overwrote=already, verified=True)


# -- the command ------------------------------------------------------------------------------------
def _identity_arg(flag: str, value: str | None) -> str | None:
    if value is None:
        return None
    text = value.strip()
    if not text:
        raise invalid_input(f"{flag} must not be empty")
    return text


def _bearer_actor(ctx: Context, profile: str) -> str:
    from .remote import connect  # the HTTP stack only when a profile is asked

    with connect(ctx, profile) as handoffs:
        return handoffs.actor_id


def cmd_mcp_install(args: argparse.Namespace, ctx: Context) -> int:
    if args.list_targets or args.target == "list":
        entries = [{"target": t, "method": m, "detail": d} for t, m, d in SUPPORTED]
        text = "Supported MCP install targets:\n" + "".join(f"  {t:<10} ({m}) {d}\n" for t, m, d in SUPPORTED)
        ctx.emit(entries, text, sort=False)
        return 0
    source_id = _identity_arg("--source-id", args.source_id)
    actor_ids = [actor for actor in (_identity_arg("--actor-id", a) for a in args.actor_ids) if actor is not None]
    profile = None
    if args.remote_profile is not None:
        profile = args.remote_profile.strip()
        if not profile:
            raise invalid_input("--remote-profile must not be empty")
        if actor_ids:
            raise invalid_input("--remote-profile cannot be combined with --actor-id; actor identity comes from the"
                                " bearer binding")
        if len(args.codex_homes) > 1:
            raise invalid_input("install one --remote-profile per Codex home so distinct account credentials cannot"
                                " be copied to several profiles")
        actor_ids.append(_bearer_actor(ctx, profile))
    if args.target != "codex" and len(actor_ids) > 1:
        raise invalid_input("repeat --actor-id only with repeatable --codex-home profiles")
    from aidememo_cli._local._worker import self_command

    home = ctx.env.get("HOME")
    if not home:
        raise _internal("could not resolve $HOME")
    plan = _Plan(program=self_command(), backend=ctx.backend, store=ctx.store_path, source_id=source_id,
                 actor_ids=actor_ids, remote_profile=profile, force=args.force, print_only=args.print,
                 no_verify=args.no_verify, home=home)
    target = "claude" if args.target == "claude-code" else args.target
    if target in ("claude", "hermes", "openclaw"):
        report = _shell_out(target, plan)
    elif target == "codex":
        report = _codex(plan, args.codex_homes, ctx.env)
    elif target in ("cursor", "opencode"):
        report = _json_file(target, plan)
    elif target == "pi":
        raise invalid_input("pi has no MCP support by upstream design — pi rejects MCP because the protocol's tool"
                            " descriptions consume too much of the context window. Use `aidememo skill install"
                            " --target pi` instead to install aidememo into pi's native Agent Skills directory.")
    else:
        raise invalid_input(f"unknown target `{target}` — supported: {', '.join(t for t, _, _ in SUPPORTED)}")
    verb = "Would run" if args.print else "Updated" if report["overwrote"] else "Registered"
    text = f"{verb} aidememo MCP server for {report['target']} ({report['method']})\n  {report['detail']}\n"
    if report.get("verified") is True:
        text += "  verified: aidememo appears in the agent's MCP list ✓\n"
    elif report.get("verified") is False:
        text += ("  verified: ⚠ install command exited 0 but `aidememo` did not show up — check the agent's config"
                 " manually\n")
    ctx.out(dumps(report, sort=False) if ctx.as_json else text)
    return 0



def register(groups: argparse._SubParsersAction[Parser]) -> None:
    p = groups.add_parser("mcp-install", help="register the stdio MCP server with an agent")
    p.set_defaults(func=cmd_mcp_install)
    p.add_argument("--target", default="claude", metavar="TARGET",
                   help="claude, hermes, openclaw, codex, cursor, opencode (or 'list')")
    p.add_argument("--force", action="store_true", help="overwrite an existing aidememo entry")
    p.add_argument("--print", action="store_true", help="show what would be done, change nothing")
    p.add_argument("--list-targets", action="store_true")
    p.add_argument("--no-verify", action="store_true", help="skip the `<agent> mcp list` check")
    p.add_argument("--source-id", metavar="SOURCE_ID", help="AIDEMEMO_SOURCE_ID for the installed server")
    p.add_argument("--actor-id", dest="actor_ids", action="append", default=[], metavar="ACTOR_ID",
                   help="AIDEMEMO_ACTOR_ID for the installed server (repeat per --codex-home)")
    p.add_argument("--remote-profile", metavar="NAME", help="route handoff tools through this profile; pins its actor")
    p.add_argument("--codex-home", dest="codex_homes", action="append", default=[], metavar="PATH",
                   help="Codex profile directory (repeatable); default CODEX_HOME, then ~/.codex")
