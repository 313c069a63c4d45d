"""``auth login|logout|list|generate``: named credential profiles in ``~/.aidememo/auth.json``.

Upstream's flags, checks and output lines (``cmd/auth.rs``), except that ``list`` never shows any
part of a token (upstream shows its first six characters) and a plain ``http://`` URL needs
``--allow-insecure-http`` unless its host is loopback.
"""

from __future__ import annotations

import argparse
import os
import secrets

from aidememo_cli._local._errors import invalid_input
from aidememo_cli._remote import _profiles as profiles
from aidememo_cli._remote._profiles import RemoteProfile

from ._context import Context, Parser, add_command, add_group

_TOKEN_WHITESPACE = "bearer token must be non-empty and contain no whitespace"


def _read_token_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise invalid_input(f"failed to read auth token file {path}: {reason}") from None
    token = raw.strip()
    if not token:
        raise invalid_input(f"auth token file {path} is empty after trimming whitespace")
    return token


def _token(literal: str | None, path: str | None) -> str:
    if literal is not None and path is not None:
        raise invalid_input("pass --token OR --token-file, not both")
    if literal is not None:
        token = literal.strip()
        if not token:
            raise invalid_input("--token is empty")
    elif path is not None:
        token = _read_token_file(path)
    else:
        raise invalid_input("aidememo auth login requires --token or --token-file")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
        raise invalid_input(_TOKEN_WHITESPACE)  # the header could not carry it (upstream's replica rule)
    return token


def cmd_login(args: argparse.Namespace, ctx: Context) -> int:
    token = _token(args.token, args.token_file)
    key = profiles.validate_url(args.url)
    profiles.check_transport(key, args.allow_insecure_http)
    path = profiles.auth_path(ctx.env)
    store = profiles.load(path)
    if args.profile is not None:
        name = profiles.validate_profile_name(args.profile)
        if args.project_id is None:
            raise invalid_input("named auth profiles require --project-id")
        project_id = profiles.validate_identity("--project-id", args.project_id)
        store.profiles[name] = RemoteProfile(name=name, url=key, project_id=project_id, token=token,
                                             added_at=ctx.now_ms, allow_insecure_http=args.allow_insecure_http)
        message = f"stored remote profile {name} for {key}"
    else:
        if args.project_id is not None:
            raise invalid_input("--project-id requires --profile")
        store.remotes[key] = {"token": token, "added_at": ctx.now_ms}
        message = f"stored token for {key}"
    profiles.save(path, store)
    ctx.out(f"{message} (in {path})")
    return 0


def cmd_logout(args: argparse.Namespace, ctx: Context) -> int:
    target = args.target.strip()
    path = profiles.auth_path(ctx.env)
    store = profiles.load(path)
    removed = store.profiles.pop(target, None) is not None
    removed = store.remotes.pop(profiles.canonical_url(args.target), None) is not None or removed
    if removed:
        profiles.save(path, store)
        ctx.out(f"removed stored credential for {target}")
    else:
        ctx.out(f"no stored credential for {target} — nothing to do")
    return 0


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    path = profiles.auth_path(ctx.env)
    store = profiles.load(path)
    if not store.remotes and not store.profiles:
        ctx.out(f"no stored tokens (file: {path})")
        return 0
    lines = [f"stored tokens ({path}):"]
    for name in sorted(store.profiles):
        entry = store.profiles[name]
        lines.append(f"  profile={name}  url={entry.url}  project={entry.project_id}  token=<redacted>"
                     f"  added_at={entry.added_at}")
    for url in sorted(store.remotes):
        lines.append(f"  {url}  token=<redacted>  added_at={store.remotes[url].get('added_at')}")
    ctx.out("\n".join(lines) + "\n")  # upstream's text ends in a newline before println adds one
    return 0


def cmd_generate(args: argparse.Namespace, ctx: Context) -> int:
    if not 1 <= args.bytes <= 256:
        raise invalid_input(f"auth generate --bytes must be in 1..=256, got {args.bytes}")
    if args.output is None:
        ctx.out(secrets.token_hex(args.bytes))  # a new secret, on request: nothing stored is shown
        return 0
    # Beyond upstream: write it straight into a 0600 file, so it never crosses a terminal.
    fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_hex(args.bytes) + "\n")
    ctx.out(f"wrote a new token to {args.output}")
    return 0


COMMANDS = ("login", "logout", "list", "generate")


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    auth = add_group(groups, "auth", "bearer-token credential profiles (~/.aidememo/auth.json)")
    p = add_command(auth, "login", cmd_login, "store a named remote profile (or a legacy URL token)")
    p.add_argument("url", metavar="URL")
    p.add_argument("--profile", metavar="NAME", help="named profile; several may share one URL")
    p.add_argument("--project-id", metavar="PROJECT_ID")
    p.add_argument("--token", metavar="TOKEN")
    p.add_argument("--token-file", metavar="PATH")
    p.add_argument("--allow-insecure-http", action="store_true",
                   help="accept plain http:// to a non-loopback host (kit extension)")
    p = add_command(auth, "logout", cmd_logout, "remove a stored profile or URL token")
    p.add_argument("target", metavar="URL_OR_PROFILE")
    add_command(auth, "list", cmd_list, "list stored credentials (tokens redacted)")
    p = add_command(auth, "generate", cmd_generate, "print a fresh random hex token")
    p.add_argument("--bytes", type=int, default=32, metavar="N")
    p.add_argument("--output", metavar="PATH", help="write it to a new 0600 file instead (kit extension)")
