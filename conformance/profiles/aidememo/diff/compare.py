"""How two answers to one step are compared: what may differ, what must not, and the departures file.

Each side's answer is *normalized* before comparison: its status, the ``Content-Type`` media type
and ``Allow`` (the headers the protocol defines), and its JSON body with every value the spec
leaves to the server replaced by a placeholder, as ``implementation_defined`` states them, each
with its clause (epochs by first appearance, timestamps, messages, search scores by order and
presence, snapshot order, ...). The episode's own ids (tenant, project, namespace) are named
too. A body that is not JSON is compared as text; a string holding JSON (an MCP tool result's
text) is normalized as JSON too.

``first_difference`` names the first differing field as a path (``body.results[0].fact_id``);
``differences`` lists them all. A departure tolerates a difference by route, query and each
side's status and code, and, if it names ``fields``, only where every difference lies in them.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from conformance.errors import ConfigError
from conformance.profiles.aidememo.implementation_defined import Comparable
from refkit.jsonvalue import loads

__all__ = ["Answer", "Departure", "Departures", "Normalizer", "difference", "differences", "first_difference",
           "requirements_of"]


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
    """One side's answers, normalized (its epochs are numbered by first appearance)."""

    names: dict[str, str] = field(default_factory=dict)  # this episode's tenant and project ids -> placeholders
    namespace: str = ""  # the episode's namespace inside client-chosen ids, shown as $ns
    values: Comparable = field(init=False)

    def __post_init__(self) -> None:
        self.values = Comparable(strings=self._named)

    def _named(self, text: str) -> str:
        if text in self.names:
            return self.names[text]
        return text.replace(self.namespace, "$ns") if self.namespace and self.namespace in text else text

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
        return Answer(status, kept, self.values.value(data), code)


def differences(ours: Any, theirs: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every field (as a path) where two normalized values differ, with both values, in order."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in [*ours, *[k for k in theirs if k not in ours]]:
            if key not in ours or key not in theirs:
                yield (f"{path}.{key}".lstrip("."), ours.get(key, "<absent>"), theirs.get(key, "<absent>"))
            else:
                yield from differences(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(ours, list) and isinstance(theirs, list):
        for index, (a, b) in enumerate(zip(ours, theirs)):
            yield from differences(a, b, f"{path}[{index}]")
        if len(ours) != len(theirs):
            yield (f"{path}.length".lstrip("."), len(ours), len(theirs))
    elif ours != theirs or type(ours) is not type(theirs):
        yield (path.lstrip(".") or "(whole)", ours, theirs)


def first_difference(ours: Any, theirs: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted path) where two normalized values differ, with both values."""
    return next(differences(ours, theirs, path), None)


def _answer_differences(target: Answer, reference: Answer) -> Iterator[tuple[str, Any, Any]]:
    if target.status != reference.status:
        yield ("status", target.status, reference.status)
    yield from differences(target.headers, reference.headers, "headers")
    yield from differences(target.body, reference.body, "body")


def difference(target: Answer, reference: Answer) -> tuple[str, Any, Any] | None:
    """The first difference of two answers: status, then headers, then body."""
    return next(_answer_differences(target, reference), None)


def _field_pattern(text: str) -> re.Pattern[str]:
    """A departure's field path as a pattern: ``[*]`` any index, ``*`` any one key; it covers the subtree."""
    pattern = re.escape(text).replace(r"\[\*\]", r"\[\d+\]").replace(r"\*", r"[^.\[]+")
    return re.compile(pattern + r"(?:$|[.\[])")


@dataclass(frozen=True, slots=True)
class Departure:
    """A known difference a run tolerates, and why."""

    route: str | None  # None: any route (the entry then names fields)
    reason: str
    query_contains: tuple[str, ...] = ()
    reference: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    fields: tuple[str, ...] = ()  # field paths it tolerates; none: every field of a matching answer pair
    source: str = ""

    def applies(self, route: str, query: str, target: Answer, reference: Answer) -> bool:
        """The entry's route, query and sides fit this step (whatever fields differ)."""
        if self.route is not None and route != self.route:
            return False
        if not all(part in query for part in self.query_contains):
            return False
        return _answer_fits(self.target, target) and _answer_fits(self.reference, reference)

    def covers(self, path: str) -> bool:
        return not self.fields or any(_field_pattern(f).match(path) for f in self.fields)

    def matches(self, route: str, query: str, target: Answer, reference: Answer) -> bool:
        """The entry tolerates every difference of this answer pair."""
        return self.applies(route, query, target, reference) and all(
            self.covers(path) for path, _, _ in _answer_differences(target, reference))


def _answer_fits(wanted: dict[str, Any], answer: Answer) -> bool:
    if "status" in wanted and wanted["status"] != answer.status:
        return False
    return "code" not in wanted or wanted["code"] == answer.error_code


@dataclass(frozen=True, slots=True)
class Departures:
    entries: tuple[Departure, ...] = ()

    def find(self, route: str, query: str, target: Answer, reference: Answer) -> Departure | None:
        """An entry that tolerates every difference of the pair (one entry alone), or None."""
        return next((d for d in self.entries if d.matches(route, query, target, reference)), None)

    def judge(self, route: str, query: str, target: Answer,
              reference: Answer) -> tuple[tuple[str, Any, Any] | None, Departure | None]:
        """(the first difference, the entry that tolerates every difference), or (a difference, None)
        naming the first one no entry of this step covers (the first one if each is covered by some
        entry but none covers them all), or (None, None) when the answers agree."""
        first = difference(target, reference)
        if first is None:
            return None, None
        whole = self.find(route, query, target, reference)
        if whole is not None:
            return first, whole
        applicable = [d for d in self.entries if d.applies(route, query, target, reference)]
        uncovered = (found for found in _answer_differences(target, reference)
                     if not any(d.covers(found[0]) for d in applicable))
        return next(uncovered, first), None

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
        extra = sorted(set(entry) - {"route", "reason", "query_contains", "reference", "target", "fields"})
        if extra:
            raise ConfigError(f"{spot}: unknown key {extra[0]!r}")
        route, reason, fields = entry.get("route"), entry.get("reason"), entry.get("fields", [])
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{spot}: needs a non-empty reason")
        if not isinstance(fields, list) or not all(isinstance(f, str) and f.strip() for f in fields):
            raise ConfigError(f"{spot}: fields must be an array of field paths (like \"body.results[*].score\")")
        if not isinstance(route, str) and (route is not None or not fields):
            raise ConfigError(f"{spot}: needs a string route, or fields it tolerates on every route")
        query = entry.get("query_contains", [])
        if not isinstance(query, list) or not all(isinstance(q, str) for q in query):
            raise ConfigError(f"{spot}: query_contains must be an array of strings")
        sides = {}
        for side in ("reference", "target"):
            value = entry.get(side, {})
            if not isinstance(value, dict) or set(value) - {"status", "code"}:
                raise ConfigError(f"{spot}: {side} must be a table of status and code")
            sides[side] = value
        out.append(Departure(route=route, reason=reason, query_contains=tuple(query), fields=tuple(fields),
                             source=where, **sides))
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
