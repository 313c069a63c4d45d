"""What every local command shares: the store, the clock, the environment and the output.

Output follows upstream byte for byte where it can: a command's text is printed with one
trailing newline; ``--json`` is pretty-printed with two-space indents; objects upstream builds
with ``json!`` come out with sorted keys (its serde_json has no ``preserve_order``), records it
serialises directly keep their declaration order.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

from refkit.records import distinct
from refkit.args import Parser
from aidememo_cli._local._errors import invalid_input
from aidememo_cli._local._scope import Settings, hermes_actor, hermes_source, load_settings
from aidememo_cli._local._store import LocalStore

__all__ = ["Context", "Command", "Parser", "add_command", "add_group", "clean", "dumps"]


def dumps(data: object, *, sort: bool, pretty: bool = True) -> str:
    if pretty:
        return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=sort)
    return json.dumps(data, ensure_ascii=False, sort_keys=sort, separators=(",", ":"))


def clean(value: str | None) -> str | None:
    """Trimmed, and ``None`` when blank (upstream's handling of optional text)."""
    text = (value or "").strip()
    return text or None


@distinct
class Context(NamedTuple):
    """Everything a command needs besides its arguments."""

    store_path: str
    backend: str
    as_json: bool
    now_ms: int  # the command's time, read once so one command sees one instant
    clock: Callable[[], int]  # later instants (heartbeats and results of `handoff run`)
    env: Mapping[str, str]
    out: Callable[[str], None]
    err: Callable[[str], None]

    def env_value(self, name: str) -> str | None:
        return clean(self.env.get(name))

    def actor(self, flag: str | None, store: LocalStore | None = None) -> str | None:
        """``--actor-id``/``--from``, else ``AIDEMEMO_ACTOR_ID`` (upstream's ``actor_id``); then,
        with a store, the kit's opt-in Hermes profile mapping."""
        found = clean(flag) or self.env_value("AIDEMEMO_ACTOR_ID")
        if found is None and store is not None:
            found = hermes_actor(self.settings(store), self.env)
        return found

    def source(self, flag: str | None, store: LocalStore | None = None, *, env: bool = True) -> str | None:
        """``--source-id``, else ``AIDEMEMO_SOURCE_ID`` where upstream reads it (``env``); then,
        with a store, the kit's opt-in stored ``source_id`` and Hermes board mapping."""
        found = clean(flag) or (self.env_value("AIDEMEMO_SOURCE_ID") if env else None)
        if found is None and store is not None:
            settings = self.settings(store)
            found = settings.source_id or hermes_source(settings.source_from_hermes, self.env)
        return found

    def emit(self, data: object, text: str, *, sort: bool = True) -> None:
        self.out(dumps(data, sort=sort) if self.as_json else text)

    @contextmanager
    def store(self, *, write: bool) -> Iterator[LocalStore]:
        store = LocalStore(self.store_path)
        try:
            with store.transaction(write=write):
                yield store
        finally:
            store.close()

    def settings(self, store: LocalStore) -> Settings:
        return load_settings(store.settings(), self.env)


Command = Callable[[argparse.Namespace, Context], int]


class _Skipped:
    """Stands in for a command the current call does not use: every parser built is start-up time,
    and agents call this CLI many times per task (``python bench/cli.py`` times the start-up)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_defaults(self, **kwargs: Any) -> None:
        pass


# The command word the current call names; other commands of its group are not built.
WANTED: list[str | None] = [None]


def add_command(sub: Any, name: str, func: Command, help_text: str) -> Any:
    if WANTED[0] is not None and WANTED[0] != name:
        return _Skipped()
    parser: Parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(func=func)
    return parser


def add_group(groups: Any, name: str, help_text: str) -> Any:
    """A command group (``session``, ``fact``, …) whose commands ``add_command`` adds."""
    return groups.add_parser(name, help=help_text).add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=Parser
    )


def positive(flag: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.strip().isdigit():
            raise argparse.ArgumentTypeError(f"{flag} takes a whole number, not {text!r}")
        return int(text)

    return parse


def require_dir(flag: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not os.path.isdir(value):
        raise invalid_input(f"{flag} must name an existing directory: {value}")
    return value
