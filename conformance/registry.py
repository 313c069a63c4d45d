"""The requirement registry: one frozen entry per normative sentence, loaded from a profile's TOML.

Each profile ships ``requirements.toml`` (``[[requirement]]`` tables with ``id``, ``level``,
``text``, ``source``, optional ``capability`` (default ``core``), ``basis``, ``excluded`` and
``clauses``). Ids carry the profile's prefix (``AM-`` for AideMemo), so reports stay unambiguous
when several profiles are installed.

A requirement whose sentence makes several promises lists them as ``clauses`` (``clauses.version
= "a second update takes version + 1"``, in the order the sentence makes them); each of its
checks names the clauses it reads (``@pytest.mark.requirement("XM-CAP-3", clauses=("version",))``),
so a promise that no check reads shows as uncovered instead of hiding behind its sentence's other
checks. A requirement without ``clauses`` is one promise: any of its checks reads it whole.

A profile may also ship ``guards.toml``: the guards of the upstream implementation (``[[guard]]``
tables with ``id``, ``upstream`` file, ``function``, ``rule``, ``reference``, ``reads`` and an
optional ``unreachable`` reason), each naming the requirements (``"ID"`` or ``"ID:clause"``) whose
checks probe it. The clause audit covers the registry's own sentences; the guard list says that no
upstream guard is left without a check, and the traceability report shows each beside its clauses.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources

from conformance.errors import ConfigError

__all__ = ["Clause", "Level", "Registry", "Requirement", "UpstreamGuard", "load_registry"]

_KEYS = {"id", "level", "text", "source", "capability", "basis", "excluded", "clauses"}
_GUARD_KEYS = {"id", "upstream", "function", "rule", "reference", "reads", "unreachable"}
_CLAUSE_ID = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


class Level(StrEnum):
    """RFC 2119 strength; decides whether a departure fails the run (MUST) or warns."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


@dataclass(frozen=True, slots=True)
class Clause:
    """One promise of a requirement's sentence, with the words of the sentence that make it."""

    id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    """One checkable sentence of a protocol profile."""

    id: str
    profile: str
    level: Level
    text: str
    source: str
    capability: str
    basis: str | None = None  # where the rule's authority comes from when that needs saying ("seed")
    excluded: str | None = None  # why the suite deliberately does not check it
    clauses: tuple[Clause, ...] = ()  # empty: the sentence is one promise

    def clause_problem(self, declared: Sequence[str]) -> str | None:
        """Why a check of this requirement may not declare ``declared`` as what it reads, or None."""
        if not self.clauses:
            return f"{self.id} has no clauses, so a check of it names none" if declared else None
        if not declared:
            known = ", ".join(c.id for c in self.clauses)
            return f"{self.id} has clauses ({known}): name the ones the check reads (clauses=(...))"
        unknown = [name for name in declared if name not in {c.id for c in self.clauses}]
        return f"{self.id} has no clause {unknown[0]!r}" if unknown else None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamGuard:
    """One guard of the upstream implementation and the requirement clauses whose checks probe it."""

    id: str
    upstream: str  # the upstream file
    function: str  # where in it the guard sits
    rule: str  # what it refuses, in the kit's words
    reference: str  # where the reference runs it
    reads: tuple[tuple[str, str], ...]  # (requirement id, clause id or "" for the whole sentence)
    unreachable: str | None = None  # why no request reaches it alone (the guard before it is in reads)


@dataclass(frozen=True, slots=True)
class Registry:
    """The requirements of one profile, by id, in file order, and the upstream guards they cover."""

    profile: str
    requirements: dict[str, Requirement]
    guards: tuple[UpstreamGuard, ...] = ()

    def get(self, requirement_id: str) -> Requirement:
        try:
            return self.requirements[requirement_id]
        except KeyError:
            raise ConfigError(f"unknown requirement id {requirement_id!r} in profile {self.profile}") from None

    def __contains__(self, requirement_id: object) -> bool:
        return requirement_id in self.requirements

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements.values())


@cache
def load_registry(profile: str, package: str, prefix: str, capabilities: Sequence[str]) -> Registry:
    """Load and validate ``requirements.toml`` of ``package`` (cached: frozen per kit version).

    Raises:
        ConfigError: a malformed entry, a duplicate id, a foreign prefix or an unknown capability.
    """
    where = f"{package}/requirements.toml"
    try:
        data = tomllib.loads(resources.files(package).joinpath("requirements.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    found: dict[str, Requirement] = {}
    for index, entry in enumerate(data.get("requirement", [])):
        spot = f"{where}: requirement[{index}]"
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise ConfigError(f"{spot}: unknown key {unknown[0]!r}")
        try:
            requirement = Requirement(
                id=entry["id"], profile=profile, level=Level(entry["level"]), text=" ".join(entry["text"].split()),
                source=entry["source"], capability=entry.get("capability", "core"), basis=entry.get("basis"),
                excluded=entry.get("excluded"), clauses=_clauses(entry.get("clauses", {}), spot),
            )
        except (KeyError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{spot}: {exc!r}") from None
        if not requirement.id.startswith(prefix):
            raise ConfigError(f"{spot}: id {requirement.id!r} lacks the profile prefix {prefix!r}")
        if requirement.capability not in capabilities:
            raise ConfigError(f"{spot}: {requirement.id} names unknown capability {requirement.capability!r}")
        if requirement.id in found:
            raise ConfigError(f"{spot}: requirement {requirement.id} is defined twice")
        found[requirement.id] = requirement
    return Registry(profile, found, _guards(package, found))


def _guards(package: str, requirements: dict[str, Requirement]) -> tuple[UpstreamGuard, ...]:
    """The profile's ``guards.toml`` (none without the file), each ``reads`` entry checked against
    the requirements: a guard that names no real clause would be covered by nothing."""
    where = f"{package}/guards.toml"
    source = resources.files(package).joinpath("guards.toml")
    if not source.is_file():
        return ()
    try:
        data = tomllib.loads(source.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    guards: list[UpstreamGuard] = []
    for index, entry in enumerate(data.get("guard", [])):
        spot = f"{where}: guard[{index}]"
        unknown = sorted(set(entry) - _GUARD_KEYS)
        if unknown:
            raise ConfigError(f"{spot}: unknown key {unknown[0]!r}")
        try:
            reads = entry["reads"]
            if not isinstance(reads, list) or not reads or not all(isinstance(r, str) for r in reads):
                raise ValueError("reads must be a non-empty list of \"ID\" or \"ID:clause\"")
            guard = UpstreamGuard(id=entry["id"], upstream=entry["upstream"], function=entry["function"],
                                  rule=entry["rule"], reference=entry["reference"],
                                  reads=tuple(_read(r, requirements) for r in reads),
                                  unreachable=entry.get("unreachable"))
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{spot}: {exc}") from None
        if any(g.id == guard.id for g in guards):
            raise ConfigError(f"{spot}: guard {guard.id} is listed twice")
        guards.append(guard)
    return tuple(guards)


def _read(entry: str, requirements: dict[str, Requirement]) -> tuple[str, str]:
    requirement_id, _, clause = entry.partition(":")
    requirement = requirements.get(requirement_id)
    if requirement is None:
        raise ValueError(f"unknown requirement {requirement_id!r}")
    problem = requirement.clause_problem((clause,) if clause else ())
    if problem is not None:
        raise ValueError(problem)
    return requirement_id, clause


def _clauses(table: object, spot: str) -> tuple[Clause, ...]:
    if not isinstance(table, dict):
        raise ConfigError(f"{spot}: clauses must be a table of clause id = text")
    clauses = []
    for clause_id, text in table.items():
        if not _CLAUSE_ID.match(clause_id) or not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{spot}: clause {clause_id!r} needs a lower-case id and a text")
        clauses.append(Clause(clause_id, " ".join(text.split())))
    if len(clauses) == 1:
        raise ConfigError(f"{spot}: one clause is the whole sentence: leave clauses out")
    return tuple(clauses)
