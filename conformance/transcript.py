"""What one check sent and got back, safe to paste into an issue.

A ``Transcript`` holds a check's entries in order: HTTP exchanges (``conformance.http``),
command runs (``conformance.process``) or any record of a profile's own with the ``Entry``
shape. Every credential the check was handed is registered with ``secret``; ``to_list`` replaces
each occurrence, anywhere in an entry, with ``<redacted:NAME>``, and credential headers are
hidden by name as well, so a report never carries a token even when a server echoes one.

``replay_script`` turns recorded entries back into a shell script (curl for HTTP, the command
line for runs) in which each credential is ``$TOKEN_<NAME>``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast

__all__ = ["Entry", "Transcript", "redact_headers", "replay_script", "shown_text"]

# Headers that carry credentials in the protocols the kit speaks (AideMemo bearer, XMemo API keys).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie", "set-cookie"})
SHOWN_BYTES = 8192  # what a report shows of one body or output stream
_REDACTED = re.compile(r"<redacted(?::([A-Za-z0-9_.-]+))?>")


class Entry(Protocol):
    """One recorded step. ``to_dict`` must give ``kind``, ``summary``, ``request`` and ``response``."""

    @property
    def answered(self) -> bool:
        """The target answered (an HTTP status, an exit status): it, not the kit, spoke last."""
        ...

    def to_dict(self) -> dict[str, object]: ...


def redact_headers(headers: list[tuple[str, str]], actor: str | None = None) -> list[tuple[str, str]]:
    """Hide credential headers; ``Authorization`` keeps its scheme (``Bearer <redacted:writer>``)."""
    hidden = f"<redacted:{actor}>" if actor else "<redacted>"
    shown = []
    for name, value in headers:
        if name.lower() in SECRET_HEADERS:
            scheme, space, _ = value.partition(" ")
            value = f"{scheme} {hidden}" if space and name.lower().endswith("authorization") else hidden
        shown.append((name, value))
    return shown


def shown_text(raw: bytes) -> str:
    """A body or stream as a report shows it: UTF-8 (replacing), cut at ``SHOWN_BYTES``."""
    text = raw[:SHOWN_BYTES].decode("utf-8", "replace")
    return text + (f"... ({len(raw)} bytes)" if len(raw) > SHOWN_BYTES else "")


@dataclass(slots=True)
class Transcript:
    """The entries of one check, in order, plus notes (identities provisioned, waits)."""

    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What a replay needs to run the same requests in a new namespace: the ids the check minted
    # (with the namespace inside each), and the identities it provisioned (label -> template values).
    ids: dict[str, str] = field(default_factory=dict)  # minted id -> its namespace
    identities: dict[str, dict[str, str]] = field(default_factory=dict)
    _secrets: dict[str, str] = field(default_factory=dict)  # credential -> label

    @property
    def exchanges(self) -> list[Entry]:
        """The entries (the name checks and reports have always used)."""
        return self.entries

    def record(self, entry: Entry) -> None:
        self.entries.append(entry)

    def minted(self, value: str, namespace: str) -> None:
        """Note an id the check made in ``namespace`` (the run tag): a replay makes it anew."""
        if namespace and namespace in value:
            self.ids[value] = namespace

    def identity(self, label: str, values: dict[str, str]) -> None:
        """Note an identity provisioned as ``label`` with these template values (never its credential)."""
        self.identities[label] = dict(values)

    def secret(self, value: str, label: str) -> None:
        """Register a credential; it never appears in ``to_list`` output."""
        if len(value) >= 4:  # a shorter "secret" would blank out ordinary text
            self._secrets[value] = label

    def scrub(self, text: str) -> str:
        for value, label in sorted(self._secrets.items(), key=lambda item: -len(item[0])):
            text = text.replace(value, f"<redacted:{label}>")
        return text

    def to_list(self) -> list[dict[str, object]]:
        return [cast(dict[str, object], self._scrubbed(entry.to_dict())) for entry in self.entries]

    def _scrubbed(self, value: object) -> object:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {key: self._scrubbed(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._scrubbed(item) for item in value]
        return value


def _tokens(text: str) -> tuple[str, set[str]]:
    """Replace ``<redacted:NAME>`` with ``$TOKEN_NAME``; return the names used."""
    names: set[str] = set()

    def swap(match: re.Match[str]) -> str:
        name = match.group(1)
        names.add(name or "")
        return f"$TOKEN_{name}" if name else "$TOKEN"

    return _REDACTED.sub(swap, text), names


def _shell_word(text: str) -> str:
    """Quote for sh; a word holding ``$TOKEN_...`` goes in double quotes so the variable expands."""
    if "$TOKEN" not in text:
        return shlex.quote(text)
    return '"' + re.sub(r'(["\\`])', r"\\\1", text) + '"'


def _http_line(entry: Mapping[str, object]) -> tuple[str, set[str]]:
    parts = ["curl", "-sS", "-i", "-X", str(entry["method"])]
    names: set[str] = set()
    headers = entry.get("request_headers")
    for pair in headers if isinstance(headers, list) else []:
        name, value = str(pair[0]), str(pair[1])
        if name.lower() in {"host", "content-length", "accept-encoding", "connection", "user-agent", "accept"}:
            continue
        value, used = _tokens(value)
        names |= used
        parts += ["-H", f"{name}: {value}"]
    if entry.get("request_body"):
        parts += ["--data-binary", str(entry["request_body"])]
    parts.append(str(entry["url"]))
    return " ".join(_shell_word(part) for part in parts), names


def _command_line(entry: Mapping[str, object]) -> tuple[str, set[str]]:
    names: set[str] = set()
    words = []
    env = entry.get("env")
    for name, value in (env.items() if isinstance(env, dict) else []):
        value, used = _tokens(str(value))
        names |= used
        words.append(f"{name}={_shell_word(value)}")
    argv = entry.get("argv")
    for word in argv if isinstance(argv, list) else []:
        text, used = _tokens(str(word))
        names |= used
        words.append(_shell_word(text))
    line = " ".join(words)
    if entry.get("stdin"):
        stdin, used = _tokens(str(entry["stdin"]))
        names |= used
        line = f"printf '%s' {_shell_word(stdin)} | {line}"
    return line, names


def replay_script(entries: list[dict[str, object]], notes: list[str] | None = None) -> str:
    """A shell script replaying recorded entries; each credential is ``$TOKEN_<NAME>``."""
    body: list[str] = []
    names: set[str] = set()
    for entry in entries:
        kind = entry.get("kind", "http")
        if kind == "http":
            line, used = _http_line(entry)
        elif kind == "command":
            line, used = _command_line(entry)
        else:
            line, used = f"# {kind}: {str(entry.get('summary', ''))}", set()
        names |= used
        body.append(line)
    lines = ["#!/bin/sh", "# Replays the recorded steps of one check. Provision the same identities, then export:"]
    lines += [f"#   TOKEN_{name}=<token of {name}>" if name else "#   TOKEN=<token>" for name in sorted(names)]
    lines += [f"# {note}" for note in notes or []]
    lines.append("set -x")
    return "\n".join(lines + body) + "\n"
