"""What one check sent and got back, safe to paste into an issue.

A ``Transcript`` holds a check's entries in order: HTTP exchanges (``conformance.http``),
command runs (``conformance.process``) or any record of a profile's own with the ``Entry``
shape. Every credential the check was handed is registered with ``secret`` under a label
unique in the transcript; ``to_list`` replaces each occurrence, anywhere in an entry, with
``<redacted:LABEL>``, and credential headers are hidden by name as well, so a report never
carries a token even when a server echoes one. For the replay script
(``conformance.reproduction.suite``) an HTTP entry also keeps its credential headers as
``replay_headers``: a registered credential there reads ``<redacted:LABEL>``, and anything else
that is not an id the check minted reads ``<redacted>`` (that step cannot be replayed exactly).

A set-up of thousands of requests (filling a project to its 10,000-resource bound) is sent inside
``unrecorded``: one ``Bulk`` entry stands for all of them (what they were, how many, the statuses
they got), so a report and a verdict record do not carry ten thousand exchanges.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, cast

__all__ = ["Bulk", "Entry", "SECRET_HEADERS", "Transcript", "WHOLE_ENTRIES", "kept", "redact_headers", "shown_text"]

# Headers that carry credentials in the protocols the kit speaks (AideMemo bearer, XMemo API keys).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie", "set-cookie"})
SHOWN_BYTES = 8192  # what a report shows of one body or output stream
# Entries a check may still read whole; older ones are settled as they are recorded, so a check
# sending hundreds of requests holds this many answers whole, not all of them. A check that
# parses an answer later than this many requests after it would read it cut: none does, and only
# answers over SHOWN_BYTES are cut at all.
WHOLE_ENTRIES = 32
_REDACTED = re.compile(r"<redacted(?::([A-Za-z0-9_.-]+))?>")


class Entry(Protocol):
    """One recorded step. ``to_dict`` must give ``kind``, ``summary``, ``request`` and ``response``;
    ``settled`` the step as its report shows it (each body cut at ``SHOWN_BYTES``, its length
    kept), so a run holds what its reports show, not every byte it received."""

    @property
    def answered(self) -> bool:
        """The target answered (an HTTP status, an exit status): it, not the kit, spoke last."""
        ...

    def to_dict(self) -> dict[str, object]: ...

    def settled(self) -> Entry: ...


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


def shown_text(raw: bytes, size: int | None = None) -> str:
    """A body or stream as a report shows it: UTF-8 (replacing), cut at ``SHOWN_BYTES``.
    ``size``: its whole length when ``raw`` is already cut (``kept``)."""
    total = len(raw) if size is None else size
    text = raw[:SHOWN_BYTES].decode("utf-8", "replace")
    return text + (f"... ({total} bytes)" if total > SHOWN_BYTES else "")


def kept(raw: bytes, size: int | None, limit: int = SHOWN_BYTES) -> tuple[bytes, int | None]:
    """``raw`` cut at ``limit`` with its whole length, for a settled entry; as it is when it fits
    (``size`` None) or was cut already."""
    if size is not None or len(raw) <= limit:
        return raw, size
    return raw[:limit], len(raw)


@dataclass(slots=True)
class Bulk:
    """Requests a check sent without recording them one by one (``Transcript.unrecorded``)."""

    what: str  # what they were, for the reader ("10,000 raw puts of custom.note")
    count: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # "HTTP 200", "exit 0": how many got each

    @property
    def answered(self) -> bool:
        return self.count > 0

    def add(self, entry: Entry) -> None:
        self.count += 1
        status, code = getattr(entry, "status", None), getattr(entry, "exit_code", None)
        self.outcomes[f"HTTP {status}" if status is not None else f"exit {code}"] += 1

    def to_dict(self) -> dict[str, object]:
        got = ", ".join(f"{outcome} x{n}" for outcome, n in self.outcomes.most_common())
        return {"kind": "bulk", "summary": f"{self.count} requests not recorded one by one: {self.what}",
                "request": self.what, "response": got or "none sent", "count": self.count}

    def settled(self) -> Bulk:
        return self


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
    _bulk: Bulk | None = None  # the open ``unrecorded`` block, which counts entries instead of keeping them

    @property
    def exchanges(self) -> list[Entry]:
        """The entries (the name checks and reports have always used)."""
        return self.entries

    def record(self, entry: Entry) -> None:
        if self._bulk is not None:
            self._bulk.add(entry)
            return
        self.entries.append(entry)
        older = len(self.entries) - WHOLE_ENTRIES - 1
        if older >= 0:
            self.entries[older] = self.entries[older].settled()

    @contextmanager
    def unrecorded(self, what: str) -> Iterator[Bulk]:
        """Entries recorded inside are counted in one ``Bulk`` entry, not kept (a bulk set-up)."""
        bulk = Bulk(what)
        self.entries.append(bulk)
        self._bulk = bulk
        try:
            yield bulk
        finally:
            self._bulk = None

    def settle(self) -> None:
        """The check is judged: each entry keeps only what its report shows (``Entry.settled``)."""
        self.entries = [entry.settled() for entry in self.entries]

    def minted(self, value: str, namespace: str) -> None:
        """Note an id the check made in ``namespace`` (the run tag): a replay makes it anew."""
        if namespace and namespace in value:
            self.ids[value] = namespace

    def identity(self, label: str, values: dict[str, str]) -> None:
        """Note an identity provisioned as ``label`` with these template values (never its credential)."""
        self.identities[label] = dict(values)

    def label(self, name: str) -> str:
        """A credential label for ``name`` that no other credential of this transcript has
        (``writer``, then ``writer-2`` for a second project's writer)."""
        taken = set(self._secrets.values())
        label, number = name, 1
        while label in taken:
            number += 1
            label = f"{name}-{number}"
        return label

    def secret(self, value: str, label: str) -> None:
        """Register a credential; it never appears in ``to_list`` output."""
        if len(value) >= 4:  # a shorter "secret" would blank out ordinary text
            self._secrets[value] = label

    def scrub(self, text: str) -> str:
        for value, label in sorted(self._secrets.items(), key=lambda item: -len(item[0])):
            text = text.replace(value, f"<redacted:{label}>")
        return text

    def to_list(self) -> list[dict[str, object]]:
        entries = []
        for entry in self.entries:
            data = cast(dict[str, object], self._scrubbed(entry.to_dict()))
            headers = data.get("replay_headers")
            if isinstance(headers, list):
                data["replay_headers"] = [[str(pair[0]), self._replayable(str(pair[0]), str(pair[1]))]
                                          for pair in headers]
            entries.append(data)
        return entries

    def _replayable(self, name: str, value: str) -> str:
        """A scrubbed credential header as a replay may send it: labels, minted ids and a scheme only."""
        if name.lower() not in SECRET_HEADERS:
            return value
        scheme, space, credential = value.partition(" ")
        if not space:
            scheme, credential = "", value
        rest = credential.strip(" ")
        if not rest or _REDACTED.fullmatch(rest) or rest in self.ids:
            return value
        return f"{scheme}{space}{credential[:len(credential) - len(credential.lstrip(' '))]}<redacted>"

    def _scrubbed(self, value: object) -> object:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {key: self._scrubbed(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._scrubbed(item) for item in value]
        return value
