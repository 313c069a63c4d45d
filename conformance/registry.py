"""The requirement registry: one frozen entry per normative sentence, loaded from TOML.

Requirement ids are namespaced by profile (``AM-`` for ``aidememo-remote``), so a second
protocol profile can share the plugin, the verdict engine and the reports.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources

from conformance.errors import ConfigError

__all__ = ["CAPABILITIES", "Level", "Registry", "Requirement", "load_registry"]

# Optional capabilities a target may claim; `core` is always claimed.
CAPABILITIES: tuple[str, ...] = ("core", "leases", "test-clock", "replica-feeds", "search", "mcp", "artifacts",
                                 "concurrency")


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
    excluded: str | None = None  # why the suite deliberately does not check it

    def __post_init__(self) -> None:
        if self.capability not in CAPABILITIES:
            raise ConfigError(f"requirement {self.id}: unknown capability {self.capability!r}")


@dataclass(frozen=True, slots=True)
class Registry:
    """All requirements of the installed profiles, by id."""

    requirements: dict[str, Requirement]

    def get(self, requirement_id: str) -> Requirement:
        try:
            return self.requirements[requirement_id]
        except KeyError:
            raise ConfigError(f"unknown requirement id {requirement_id!r}") from None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.requirements.values())


_PROFILE_FILES = {"aidememo-remote": ("conformance.profiles.aidememo", "requirements.toml")}


@cache
def load_registry() -> Registry:
    """Load every profile's requirements (cached: the file is frozen per kit version)."""
    found: dict[str, Requirement] = {}
    for profile, (package, name) in _PROFILE_FILES.items():
        data = tomllib.loads(resources.files(package).joinpath(name).read_text("utf-8"))
        for entry in data["requirement"]:
            requirement = Requirement(
                id=entry["id"],
                profile=profile,
                level=Level(entry["level"]),
                text=" ".join(entry["text"].split()),
                source=entry["source"],
                capability=entry.get("capability", "core"),
                excluded=entry.get("excluded"),
            )
            if requirement.id in found:
                raise ConfigError(f"requirement {requirement.id} is defined twice")
            found[requirement.id] = requirement
    return Registry(found)
