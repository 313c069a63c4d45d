"""Expected failures: a TOML list of checks (or whole requirements) known to fail on a target.

    [[expected_failure]]
    check = "test_auth.py::test_lowercase_bearer_scheme_is_refused"   # node id suffix
    reason = "issue #12: scheme compared case-insensitively"

    [[expected_failure]]
    requirement = "AM-MBOX-4"
    reason = "upstream answers 500 for before_seq > 2^63-1"

A listed check that fails reads XFAIL; one that passes reads XPASS and fails the run, so the
file cannot silently outlive the bugs it excuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.errors import ConfigError
from conformance.registry import Registry
from conformance.settings import read_toml

__all__ = ["Baseline", "load_baseline"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    check: str | None
    requirement: str | None
    reason: str

    def matches(self, nodeid: str, requirement_id: str) -> bool:
        if self.check is not None:
            return nodeid == self.check or nodeid.endswith(("/" + self.check, "::" + self.check))
        return self.requirement == requirement_id


@dataclass(frozen=True, slots=True)
class Baseline:
    entries: tuple[Entry, ...]

    def expects(self, nodeid: str, requirement_id: str) -> str | None:
        """The reason a check is expected to fail, or None."""
        entry = next((e for e in self.entries if e.matches(nodeid, requirement_id)), None)
        return entry.reason if entry is not None else None

    def unmatched(self, checks: list[tuple[str, str]]) -> list[str]:
        """Entries naming no check of this run (renamed, removed, or deselected)."""
        return [entry.check or entry.requirement or "" for entry in self.entries
                if not any(entry.matches(nodeid, rid) for nodeid, rid in checks)]


def load_baseline(path: str, registry: Registry) -> Baseline:
    """Read and validate a baseline file.

    Raises:
        ConfigError: unreadable file, unknown keys or requirement ids, missing reasons.
    """
    data = read_toml(path, "baseline")
    unknown = set(data) - {"expected_failure"}
    if unknown:
        raise ConfigError(f"baseline {path}: unknown key {sorted(unknown)[0]!r}")
    entries = []
    for index, raw in enumerate(data.get("expected_failure", [])):
        where = f"baseline {path}: expected_failure[{index}]"
        if not isinstance(raw, dict) or set(raw) - {"check", "requirement", "reason"}:
            raise ConfigError(f"{where}: only check, requirement and reason are allowed")
        check, requirement, reason = raw.get("check"), raw.get("requirement"), raw.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{where}: every entry needs a reason")
        if check is None and requirement is None:
            raise ConfigError(f"{where}: name a check or a requirement")
        if not isinstance(check, str | None) or not isinstance(requirement, str | None):
            raise ConfigError(f"{where}: check and requirement must be strings")
        if requirement is not None and requirement not in registry.requirements:
            raise ConfigError(f"{where}: unknown requirement {requirement!r}")
        entries.append(Entry(check=check, requirement=requirement, reason=reason.strip()))
    return Baseline(tuple(entries))
