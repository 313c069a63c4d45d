"""``shim install|remove``: an opt-in ``aidememo`` command that runs this kit.

Upstream's packets, resume lines and worker lane call ``aidememo`` by name. The shim is a
two-line shell script in a directory the user chooses; it is never installed by default and
refuses to replace, or sit beside, an ``aidememo`` that is not itself a shim (a real upstream
install), unless ``--force``.
"""

from __future__ import annotations

import argparse
import os
import shutil

from aidememo_cli._local._errors import invalid_input

from ._context import Context, Parser, add_command, add_group

MARKER = "# aidememo-ref shim"
_DEFAULT_DIR = os.path.join("~", ".local", "bin")


def _is_shim(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return MARKER in handle.read(256)
    except OSError:
        return False


def cmd_install(args: argparse.Namespace, ctx: Context) -> int:
    from aidememo_cli._local._worker import self_command

    directory = os.path.abspath(os.path.expanduser(args.dir))
    target = os.path.join(directory, "aidememo")
    if os.path.exists(target) and not _is_shim(target) and not args.force:
        raise invalid_input(f"{target} exists and is not an aidememo-ref shim; pass --force to replace it")
    other = shutil.which("aidememo", path=ctx.env.get("PATH"))
    if other is not None and os.path.abspath(other) != target and not _is_shim(other) and not args.force:
        raise invalid_input(f"an aidememo is already on PATH at {other}; keep it and set AIDEMEMO_BIN for the kit,"
                            " or pass --force")
    os.makedirs(directory, exist_ok=True)
    program = self_command()
    quoted = "'" + program.replace("'", "'\"'\"'") + "'"
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(f"#!/bin/sh\n{MARKER}: upstream's command name for the kit's local CLI\nexec {quoted} \"$@\"\n")
    os.chmod(target, 0o755)
    on_path = directory in (os.path.abspath(p) for p in ctx.env.get("PATH", "").split(os.pathsep) if p)
    lines = [f"Installed {target} -> {program}"]
    if not on_path:
        lines.append(f'Add it to PATH: export PATH="{directory}:$PATH"')
    ctx.emit({"shim": target, "program": program, "on_path": on_path}, "\n".join(lines))
    return 0


def cmd_remove(args: argparse.Namespace, ctx: Context) -> int:
    target = os.path.join(os.path.abspath(os.path.expanduser(args.dir)), "aidememo")
    if not _is_shim(target):
        raise invalid_input(f"{target} is not an aidememo-ref shim; nothing removed")
    os.remove(target)
    ctx.emit({"removed": target}, f"Removed {target}")
    return 0


COMMANDS = ('install', 'remove')


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    shim = add_group(groups, "shim", "opt-in `aidememo` command for this kit")
    p = add_command(shim, "install", cmd_install, "write DIR/aidememo that runs aidememo-ref")
    p.add_argument("--dir", default=_DEFAULT_DIR, help="default ~/.local/bin")
    p.add_argument("--force", action="store_true", help="replace or sit beside a non-shim aidememo")
    p = add_command(shim, "remove", cmd_remove, "remove DIR/aidememo if it is a shim")
    p.add_argument("--dir", default=_DEFAULT_DIR)
