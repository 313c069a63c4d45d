"""What the commands read from their arguments: seeds, ledger factories, targets and the secrets
they need, and the words that name them again in a printed command (secrets as variables, never
values).
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulations.errors import SimulationError

if TYPE_CHECKING:
    from simulations.targets import HttpTarget

__all__ = ["factory_spec", "parse_tokens", "replay_words", "secret", "secret_words", "seed_of", "shard_projects", "target_from_args", "target_words"]


def seed_of(args: argparse.Namespace) -> int:
    """The run's seed: the one given, else a fresh one (printed by the caller, so it replays)."""
    return args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)


def factory_spec(ledger: str | None) -> str | None:
    """``--ledger FILE:NAME`` with FILE made absolute, so the exported replay runs from anywhere."""
    if not ledger:
        return None
    path, _, name = ledger.rpartition(":")
    return f"{Path(path).resolve()}:{name}"


def parse_tokens(pairs: Sequence[str], flag: str = "--token") -> dict[str, str]:
    """``ACTOR=SECRET``, ``ACTOR=@FILE`` (the file's first line) or, for ``--token``, ``ACTOR`` alone
    (its ``TOKEN_<ACTOR>`` variable): a secret on the command line shows in ``ps`` to every user
    of the machine, a file or a variable does not."""
    from simulations.targets import token_variable

    tokens = {}
    for pair in pairs:
        actor, sep, token = pair.partition("=")
        if flag == "--token" and actor and not sep:
            token = os.environ.get(token_variable(actor), "")
            if not token:
                raise SimulationError(f"--token {actor} reads {token_variable(actor)}, which is not set")
        elif not sep or not actor or not token:
            raise SimulationError(f"{flag} takes ACTOR={flag.lstrip('-').upper()} or ACTOR=@FILE, not {pair!r}")
        tokens[actor] = secret(token, flag)
    return tokens


def secret(value: str, flag: str) -> str:
    """``value``, or for ``@FILE`` the file's first line; the file must be its owner's alone (0600)."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:])
    try:
        if path.stat().st_mode & 0o077:
            raise SimulationError(f"{flag}: {path} must not be readable by group or others (chmod 600)")
        secret = path.read_text(encoding="utf-8").split("\n", 1)[0].rstrip("\r")
    except OSError as exc:
        raise SimulationError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise SimulationError(f"{flag}: {path} is not UTF-8") from None
    if not secret:
        raise SimulationError(f"{flag}: {path} is empty")
    return secret


def target_from_args(args: argparse.Namespace, actors: int | Sequence[str] | None = None) -> HttpTarget | None:
    from simulations.targets import HttpTarget, target_from_config

    if args.config is not None:
        return target_from_config(args.config, getattr(args, "actors", 3) if actors is None else actors)
    if args.url is None:
        if args.token or args.project:
            raise SimulationError("--token and --project need --url")
        return None
    if not args.project:
        raise SimulationError("--url needs --project")
    return HttpTarget(args.url, args.project, parse_tokens(args.token))


def target_words(args: argparse.Namespace) -> list[str]:
    parts: list[str] = []
    if args.config is not None:
        parts += ["--config", str(args.config)]
    if args.url is not None:
        parts += ["--url", args.url, "--project", str(args.project)]
        parts += secret_words("--token", "TOKEN", [pair.partition("=")[0] for pair in args.token])
    return parts


def secret_words(flag: str, variable: str, actors: Sequence[str]) -> list[str]:
    """A rerun command names secrets, never shows them: ``--token ACTOR`` (read from its
    ``TOKEN_<ACTOR>`` variable, so the token is never in the process's arguments) or
    ``flag ACTOR=$VARIABLE_ACTOR`` per actor."""
    parts: list[str] = []
    for actor in actors:
        name = f"${variable}_{actor.replace('-', '_').upper()}" if actor else f"${variable}"
        parts += [flag, actor if flag == "--token" else f"{actor}={name}" if actor else name]
    return parts


def replay_words(args: argparse.Namespace, project: str) -> list[str]:
    """What ``replay`` needs besides the file: a run by ``--url`` gives its target again (tokens as
    variables); a ledger factory or a target file, recorded in the file, is named again, since a
    replay file is data and its recorded code runs only when the command line names it."""
    from simulations.targets import named_words

    if args.url is None:
        return named_words(factory_spec(args.ledger) if getattr(args, "ledger", None) else None, args.config)
    return ["--url", args.url, "--project", project,
            *secret_words("--token", "TOKEN", [pair.partition("=")[0] for pair in args.token])]


def shard_projects(args: argparse.Namespace, specs: list[Any], first: HttpTarget, actors: int) -> list[Any]:
    """One project per shard, provisioned here by the target file's command (the workers only
    talk HTTP); the tokens travel to the workers inside the shard specs, never in a command.

    Raises:
        SimulationError: when the target file has fixed tokens (every shard would share a project).
    """
    from dataclasses import replace

    from simulations.targets import target_from_config

    targets = [first, *(target_from_config(args.config, actors) for _ in specs[1:])]
    if len({t.project for t in targets if t is not None}) < len(specs):
        raise SimulationError(f"{args.config} has fixed tokens: shards need a project each, so give the target "
                              "file a provisioning command")
    print(f"provisioned {len(specs)} projects on {first.url}, one per shard")
    return [replace(spec, url=t.url, project=t.project, tokens=dict(t.tokens), timeout_s=t.timeout_s,
                    config=str(args.config)) for spec, t in zip(specs, targets) if t is not None]
