"""``--auth-bindings-file``: bearer tokens bound to one ``source_id`` and one ``actor_id``.

The file is upstream's ``aidememo mcp-serve`` format (wire spec Appendix B): ``{"tokens": [{"token",
"source_id", "actor_id"}]}`` or a bare list of those objects, each value trimmed and non-empty,
tokens unique, at least one entry, same messages. On the reference server the binding confines a
token that the server already knows (bootstrap binds the token to its actor): through the MCP
gateway it can act only as the bound actor and read and write only the bound source, and it is
refused on every REST route, where no such confinement exists. Only digests are kept in memory.
Beyond upstream: the file holds live tokens, so it must be private (no group or other access).
"""

from __future__ import annotations

import json
import os
import stat
import threading
from dataclasses import dataclass

from aidememo_wire.ids import bearer_digest, id_problem
from .._errors import AideMemoRefError

__all__ = ["Binding", "Bindings", "BindingsError", "load_bindings"]


class BindingsError(AideMemoRefError):
    """The bindings file is unusable; the message names the file and the entry, never a token."""


@dataclass(frozen=True, slots=True)
class Binding:
    source_id: str
    actor_id: str


class Bindings:
    """Token digest -> binding. Thread-safe; the embedded reference adds bindings at run time."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, Binding] = {}
        self._lock = threading.Lock()

    def bind(self, token: str, source_id: str, actor_id: str) -> None:
        for field, value in (("source_id", source_id), ("actor_id", actor_id)):
            if id_problem(value) is not None:
                raise BindingsError(f"binding {field} {value!r} is not a valid identifier")
        with self._lock:
            self._by_digest[bearer_digest(token)] = Binding(source_id, actor_id)

    def lookup(self, token: bytes) -> Binding | None:
        with self._lock:
            return self._by_digest.get(bearer_digest(token.decode("ascii", "replace")))

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_digest)


def _value(entry: object, field: str, index: int, path: str) -> str:
    value = entry.get(field) if isinstance(entry, dict) else None
    if not isinstance(value, str):
        raise BindingsError(f"failed to parse auth bindings file {path}: entry {index} lacks a string {field}")
    text = value.strip()
    if not text:
        raise BindingsError(f"auth bindings file {path} entry {index} has an empty {field}")
    if field != "token" and id_problem(text) is not None:
        raise BindingsError(f"auth bindings file {path} entry {index} has an invalid {field}")
    return text


def load_bindings(path: str) -> Bindings:
    """Read and check the whole file; any problem refuses it (the server does not start)."""
    try:
        info = os.stat(path)
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise BindingsError(f"auth bindings file {path} must not be readable by group or others (chmod 600)")
        with open(path, encoding="utf-8") as handle:
            raw = handle.read()
    except OSError as exc:
        raise BindingsError(f"failed to read auth bindings file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BindingsError(f"failed to read auth bindings file {path}: not UTF-8") from None
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise BindingsError(f"failed to parse auth bindings file {path}: {exc}") from None
    entries = document.get("tokens") if isinstance(document, dict) else document
    if not isinstance(entries, list):
        raise BindingsError(f"failed to parse auth bindings file {path}: expected {{\"tokens\": [...]}} or a list")
    if not entries:
        raise BindingsError(f"auth bindings file {path} contains no token bindings")
    bindings = Bindings()
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        token = _value(entry, "token", index, path)
        source_id, actor_id = _value(entry, "source_id", index, path), _value(entry, "actor_id", index, path)
        if token in seen:
            raise BindingsError(f"auth bindings file {path} contains a duplicate token at entry {index}")
        seen.add(token)
        bindings.bind(token, source_id, actor_id)
    return bindings
