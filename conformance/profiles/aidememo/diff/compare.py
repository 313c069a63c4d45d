"""How two answers to one step are compared: what may differ, what must not, and the departures file.

Each side's answer is *normalized* before comparison:

* status, the ``Content-Type`` media type and ``Allow`` (the headers the protocol defines) are kept;
* the JSON body is kept value for value, except what a server chooses: project epochs become
  ``<epoch#k>``, numbered by first appearance on that side, so the target's and the
  reference's epochs are matched as a bijection rather than literally; timestamps (``*_at_ms``,
  ``now_ms``) become ``<time>``, because a served target's clock is not the reference's (lease
  expiry is still compared: the clock steps move both test clocks together); health's
  ``schema_version`` becomes ``<integer>`` (each storage has its own; AM-HEALTH-1 asks for an
  integer); an error's
  ``message`` text becomes ``<message>`` (the code is compared; the wording is not the protocol's);
* a string holding JSON (an MCP tool result's text) is normalized as JSON too.

A body that is not JSON is compared as text. ``first_difference`` names the first differing
field as a dotted path.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from conformance.errors import ConfigError
from refkit.jsonvalue import loads

__all__ = ["Answer", "Departure", "Departures", "Normalizer", "first_difference", "requirements_of"]

EPOCH_KEYS = frozenset({"project_epoch", "epoch"})
TIME_KEYS_SUFFIX = "_at_ms"


@dataclass(frozen=True, slots=True)
class Answer:
    """One side's normalized answer."""

    status: int
    headers: dict[str, str]
    body: Any
    error_code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "headers": self.headers, "body": self.body}


@dataclass(slots=True)
class Normalizer:
    """One side's names for the values it chose, by first appearance."""

    names: dict[str, str] = field(default_factory=dict)  # this episode's tenant and project ids -> placeholders
    namespace: str = ""  # the episode's namespace inside client-chosen ids, shown as $ns
    epochs: dict[str, str] = field(default_factory=dict)

    def answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> Answer:
        kept: dict[str, str] = {}
        for name, value in headers:
            lower = name.lower()
            if lower == "content-type":
                kept[lower] = value.split(";")[0].strip().lower()
            elif lower == "allow":
                kept[lower] = ",".join(sorted(part.strip().upper() for part in value.split(",")))
        try:
            data: Any = loads(body) if body else None
        except ValueError:  # not JSON, not UTF-8, or nested too deep: compared as text
            data = {"<text>": body.decode("utf-8", "replace")}
        code = None
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            code = data["error"].get("code") if isinstance(data["error"].get("code"), str) else None
        return Answer(status, kept, self.value(data), code)

    def value(self, data: Any, key: str = "") -> Any:
        if isinstance(data, dict):
            out = {}
            for k, v in data.items():
                if k == "message" and key == "error":
                    out[k] = "<message>"
                else:
                    out[k] = self.value(v, k)
            return out
        if isinstance(data, list):
            return [self.value(item, key) for item in data]
        if isinstance(data, str):
            if data in self.names:
                return self.names[data]
            if self.namespace and self.namespace in data:
                data = data.replace(self.namespace, "$ns")
            if key in EPOCH_KEYS:
                return self.epochs.setdefault(data, f"<epoch#{len(self.epochs) + 1}>")
            if data[:1] in ("{", "[") and len(data) > 1:
                try:
                    return {"<json>": self.value(loads(data), key)}
                except ValueError:
                    return data
            return data
        if isinstance(data, int) and not isinstance(data, bool):
            if key.endswith(TIME_KEYS_SUFFIX) or key == "now_ms":
                return "<time>"
            if key == "schema_version":  # the storage's own (SQLite 4, PostgreSQL 2): AM-HEALTH-1 says <integer>
                return "<integer>"
        return data


def first_difference(ours: Any, theirs: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted path) where two normalized values differ, with both values."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in [*ours, *[k for k in theirs if k not in ours]]:
            if key not in ours or key not in theirs:
                return (f"{path}.{key}".lstrip("."), ours.get(key, "<absent>"), theirs.get(key, "<absent>"))
            found = first_difference(ours[key], theirs[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        for index, (a, b) in enumerate(zip(ours, theirs)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        if len(ours) != len(theirs):
            return (f"{path}.length".lstrip("."), len(ours), len(theirs))
        return None
    if ours != theirs or type(ours) is not type(theirs):
        return (path.lstrip(".") or "(whole)", ours, theirs)
    return None


def difference(target: Answer, reference: Answer) -> tuple[str, Any, Any] | None:
    """The first difference of two answers: status, then headers, then body."""
    if target.status != reference.status:
        return ("status", target.status, reference.status)
    found = first_difference(target.headers, reference.headers, "headers")
    return found or first_difference(target.body, reference.body, "body")


@dataclass(frozen=True, slots=True)
class Departure:
    """A known difference a run tolerates, and why."""

    route: str
    reason: str
    query_contains: tuple[str, ...] = ()
    reference: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def matches(self, route: str, query: str, target: Answer, reference: Answer) -> bool:
        if route != self.route or not all(part in query for part in self.query_contains):
            return False
        return _answer_fits(self.target, target) and _answer_fits(self.reference, reference)


def _answer_fits(wanted: dict[str, Any], answer: Answer) -> bool:
    if "status" in wanted and wanted["status"] != answer.status:
        return False
    return "code" not in wanted or wanted["code"] == answer.error_code


@dataclass(frozen=True, slots=True)
class Departures:
    entries: tuple[Departure, ...] = ()

    def find(self, route: str, query: str, target: Answer, reference: Answer) -> Departure | None:
        return next((d for d in self.entries if d.matches(route, query, target, reference)), None)

    @classmethod
    def load(cls, extra: Path | None) -> Departures:
        """The kit's departures (the reference's errata), then ``extra``'s.

        Raises:
            ConfigError: ``extra`` is unreadable or malformed (naming the file and entry).
        """
        builtin = resources.files(__package__).joinpath("departures.toml").read_text("utf-8")
        entries = _parse(tomllib.loads(builtin), "the kit's departures.toml")
        if extra is not None:
            try:
                data = tomllib.loads(extra.read_text("utf-8"))
            except OSError as exc:
                raise ConfigError(f"departures file {extra}: {exc.strerror}") from None
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"departures file {extra}: {exc}") from None
            entries += _parse(data, str(extra))
        return cls(entries)


def _parse(data: dict[str, Any], where: str) -> tuple[Departure, ...]:
    unknown = sorted(set(data) - {"departure"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected [[departure]] entries)")
    out = []
    for index, entry in enumerate(data.get("departure", [])):
        spot = f"{where}: departure[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{spot}: expected a table")
        extra = sorted(set(entry) - {"route", "reason", "query_contains", "reference", "target"})
        if extra:
            raise ConfigError(f"{spot}: unknown key {extra[0]!r}")
        route, reason = entry.get("route"), entry.get("reason")
        if not isinstance(route, str) or not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{spot}: needs a string route and a non-empty reason")
        query = entry.get("query_contains", [])
        if not isinstance(query, list) or not all(isinstance(q, str) for q in query):
            raise ConfigError(f"{spot}: query_contains must be an array of strings")
        sides = {}
        for side in ("reference", "target"):
            value = entry.get(side, {})
            if not isinstance(value, dict) or set(value) - {"status", "code"}:
                raise ConfigError(f"{spot}: {side} must be a table of status and code")
            sides[side] = value
        out.append(Departure(route=route, reason=reason, query_contains=tuple(query), source=where, **sides))
    return tuple(out)


def requirements_of(route: str, codes: tuple[str | None, ...]) -> list[str]:
    """The requirement ids a divergence on ``route`` answering ``codes`` touches, where the map knows them."""
    text = resources.files(__package__).joinpath("route_requirements.toml").read_text("utf-8")
    data = tomllib.loads(text)
    found = list(data["routes"].get(route, []))
    for code in codes:
        for requirement in data["codes"].get(code or "", []):
            if requirement not in found:
                found.append(requirement)
    return found
