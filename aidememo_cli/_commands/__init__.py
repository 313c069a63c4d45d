"""``aidememo-ref``'s local command groups: upstream ``aidememo``'s local surface on an embedded store.

Global options come first, as upstream's: ``-s/--store PATH``, ``-P/--project NAME``,
``--backend NAME``, ``-j/--json`` (``--store`` and ``--json`` are also accepted after the
command words). The store is ``--store``, else ``$AIDEMEMO_STORE``, else
``~/.aidememo/local.sqlite``. Every refusal is upstream's one line, ``Error: <message>`` on
stderr with exit status 1, with or without ``--json``; so is bad syntax.

Start-up matters (agents call this dozens of times per task): only the standard library and
the chosen group's modules are imported; ``handoff run`` and ``mcp`` import their own.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Mapping

from refkit.args import Parser, UsageError, reader_gone
from aidememo_cli._local._errors import AideMemoCliError, LocalError, LocalErrorCode, invalid_input

from ._context import Context, clean

__all__ = ["main", "GROUPS"]

# group -> (module, register function)
GROUPS: dict[str, tuple[str, str]] = {
    "session": ("session", "register"),
    "fact": ("fact", "register"),
    "workflow": ("workflow", "register"),
    "agent": ("agent", "register"),
    "installation": ("agent", "register_installation"),
    "handoff": ("handoff", "register"),
    "profile": ("profile", "register"),
    "config": ("config", "register"),
    "mcp": ("mcp", "register"),
    "shim": ("shim", "register"),
    "auth": ("auth", "register"),
    "replica": ("replica", "register"),
    "mcp-install": ("mcp_install", "register"),
}
_BACKENDS = ("sqlite", "libsqlite")
USAGE = (
    "usage: aidememo-ref [-s PATH] [-j] [--backend sqlite] GROUP ... | aidememo-ref --version\n"
    f"groups: {', '.join(GROUPS)} (token-free local flow); bootstrap, serve (reference server);"
    " xmemo bootstrap|serve (XMemo reference server)"
)


class _Globals:
    __slots__ = ("store", "json", "backend", "project", "now_ms")

    def __init__(self) -> None:
        self.store: str | None = None
        self.json = False
        self.backend = "sqlite"
        self.project: str | None = None
        self.now_ms: int | None = None


def _value(argv: list[str], index: int, flag: str) -> str:
    if index + 1 >= len(argv):
        raise UsageError(f"aidememo-ref: {flag} expects a value")
    return argv[index + 1]


def _split_globals(argv: list[str]) -> tuple[_Globals, list[str]]:
    """Leading global options (and ``--store``/``--json`` anywhere), then the command words."""
    found = _Globals()
    rest: list[str] = []
    index, leading = 0, True
    while index < len(argv):
        token = argv[index]
        name, eq, inline = token.partition("=")
        takes = name in ("-s", "--store", "-P", "--project", "--backend", "--now-ms") if leading else name == "--store"
        if takes:
            value = inline if eq else _value(argv, index, name)
            index += 1 if eq else 2
            if name in ("-s", "--store"):
                found.store = value
            elif name in ("-P", "--project"):
                found.project = value
            elif name == "--backend":
                found.backend = value
            else:
                try:
                    found.now_ms = int(value)
                except ValueError:
                    raise UsageError(f"aidememo-ref: --now-ms takes milliseconds, not {value!r}") from None
            continue
        if token in ("-j", "--json"):
            found.json = True
        elif leading and token.startswith("-") and token not in ("-h", "--help"):
            raise UsageError(f"aidememo-ref: unknown global option {token}")
        else:
            leading = False
            rest.append(token)
        index += 1
    return found, rest


def _backend(value: str) -> str:
    normalized = value.strip().lower()
    if normalized in _BACKENDS:
        return normalized
    if normalized == "redb":
        detail = "store.backend = redb is not available in aidememo-ref; use 'sqlite'"
    elif normalized == "libsql":
        detail = "store.backend = libsql is not supported yet; use 'sqlite' for the local SQLite backend"
    else:
        detail = f"store.backend must be 'redb', 'sqlite', or 'libsqlite', got '{value}'"
    raise _Refusal(f"Error setting backend override: {LocalError(LocalErrorCode.INVALID_INPUT, detail)}")


class _Refusal(AideMemoCliError):
    """A one-line refusal printed as it is (upstream prints a few without the ``Error:`` prefix)."""


def store_path(flag: str | None, env: Mapping[str, str]) -> str:
    if flag is not None and flag.strip():
        path = os.path.abspath(os.path.expanduser(flag))
    else:
        path = os.path.abspath(os.path.expanduser(
            env.get("AIDEMEMO_STORE", "").strip() or os.path.join("~", ".aidememo", "local.sqlite")))
    if os.path.isdir(path):
        raise invalid_input(f"store {path} is a directory; pass a file path")
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise invalid_input(f"cannot create store directory {parent}: {exc.strerror}") from exc
    return path


def _test_clock(found: _Globals, env: Mapping[str, str]) -> int | None:
    """``--now-ms`` or ``AIDEMEMO_NOW_MS`` pins the clock (tests only: staleness without sleeping)."""
    if found.now_ms is not None:
        return found.now_ms
    text = env.get("AIDEMEMO_NOW_MS", "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise invalid_input("AIDEMEMO_NOW_MS must be an integer number of milliseconds") from None


def _parser(group: str, command: str | None) -> Parser:
    from . import _context

    module_name, register = GROUPS[group]
    module = importlib.import_module(f"{__name__}.{module_name}")
    parser = Parser(prog="aidememo-ref", add_help=True)
    groups = parser.add_subparsers(dest="group", metavar="GROUP", required=True, parser_class=Parser)
    known = getattr(module, "COMMANDS", ())
    _context.WANTED[0] = command if command in known else None
    try:
        getattr(module, register)(groups)
    finally:
        _context.WANTED[0] = None
    return parser


def _command_word(rest: list[str]) -> str | None:
    """The word after the group (``handoff --remote-profile P send``: ``send``)."""
    words = [token for token in rest[1:] if not token.startswith("-")]
    if rest[0] == "handoff" and "--remote-profile" in rest[1:2]:
        words = words[1:]
    return words[0] if words else None


def _place_trailing(args: argparse.Namespace, extras: list[str]) -> None:
    """Give a late optional positional its value.

    argparse binds an optional positional that follows a required one (``send AGENT [SESSION]``)
    in the same chunk as the required one, so ``send AGENT --from A SESSION`` leaves SESSION
    over; it is placed here instead.
    """
    if not extras:
        return
    slot = getattr(args, "trailing", None)
    if slot is None or getattr(args, slot) is not None or len(extras) != 1 or extras[0].startswith("-"):
        raise UsageError(f"aidememo-ref: unrecognized arguments: {' '.join(extras)}")
    setattr(args, slot, extras[0])


def main(argv: list[str]) -> int:
    """Run one local command; ``argv`` is everything after the program name."""
    env = os.environ
    try:
        found, rest = _split_globals(argv)
        if not rest or rest[0] in ("-h", "--help"):
            print(USAGE)
            return 0 if rest else 1
        if rest[0] not in GROUPS:
            raise UsageError(f"aidememo-ref: unknown command {rest[0]!r}; expected one of {', '.join(GROUPS)}")
        args, extras = _parser(rest[0], _command_word(rest)).parse_known_args(rest)
        _place_trailing(args, extras)
        backend = _backend(found.backend)
        if found.project is not None:
            raise _Refusal(f"Error: project '{found.project}' not registered. Run `aidememo project list`.")
        fixed = _test_clock(found, env)
        ctx = Context(
            store_path=store_path(getattr(args, "wiki_root", None) or found.store, env),
            backend=backend,
            as_json=found.json,
            now_ms=fixed if fixed is not None else time.time_ns() // 1_000_000,
            clock=(lambda: fixed) if fixed is not None else (lambda: time.time_ns() // 1_000_000),
            env=env,
            out=lambda text: print(text, flush=True),
            err=lambda text: print(text, file=sys.stderr, flush=True),
        )
        if rest[0] == "handoff" and (name := clean(args.remote_profile) or ctx.env_value("AIDEMEMO_REMOTE_PROFILE")):
            from . import remote  # the HTTP stack loads only for the remote route

            return remote.run(args, ctx, name)
        return int(args.func(args, ctx))
    except (UsageError, LocalError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except _Refusal as exc:
        print(exc, file=sys.stderr)
        return 1
    except BrokenPipeError:
        return reader_gone()
    except UnicodeEncodeError:
        # Undecodable bytes in an argument or variable arrive as surrogates and cannot be stored.
        print("Error: invalid input: arguments and variables must be valid UTF-8", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"Error: {exc.filename or 'system'}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        return 130
