"""The requirement registry: one frozen entry per normative sentence, loaded from a profile's TOML.

Each profile ships ``requirements.toml`` (``[[requirement]]`` tables with ``id``, ``level``,
``text``, ``source``, optional ``capability`` (default ``core``), ``basis`` and ``excluded``).
Ids carry the profile's prefix (``AM-`` for AideMemo), so reports stay unambiguous when
several profiles are installed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources

from conformance.errors import ConfigError

__all__ = ["Level", "Registry", "Requirement", "load_registry"]

_KEYS = {"id", "level", "text", "source", "capability", "basis", "excluded"}


class Level(StrEnum):
    """RFC 2119 strength; decides whether a departure fails the run (MUST) or warns."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


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


@dataclass(frozen=True, slots=True)
class Registry:
    """The requirements of one profile, by id, in file order."""

    profile: str
    requirements: dict[str, Requirement]

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
                excluded=entry.get("excluded"),
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
    return Registry(profile, found)
