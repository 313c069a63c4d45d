"""Known departures of a target: a TOML list of checks (or whole requirements) and why.

    [[expected_failure]]
    check = "test_auth.py::test_lowercase_bearer_scheme_is_refused"   # node id suffix
    reason = "issue #12: scheme compared case-insensitively"

    [[expected_warning]]
    requirement = "AM-MBOX-4"
    reason = "upstream answers 500 for before_seq > 2^63-1"

A listed check that fails reads XFAIL; one that passes reads XPASS, a stale entry, and fails
the run, so the file cannot silently outlive the bugs it excuses. A WARN fails no run, so an
expected warning only marks it as known (the record carries the entry's reason); when its
check passes, the entry is reported stale and the run still succeeds. ``write_baseline``
turns a run's ``results.json`` into such a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tomli_w

from conformance.errors import ConfigError
from conformance.registry import Registry
from conformance.settings import read_toml
from conformance.verdicts import Verdict, VerdictRecord
from refkit.jsonvalue import loads

__all__ = ["Baseline", "Entry", "load_baseline", "read_results", "stale_entries", "write_baseline"]

Kind = Literal["failure", "warning"]
_TABLES: dict[str, Kind] = {"expected_failure": "failure", "expected_warning": "warning"}
# What a baseline written from results lists: the verdicts a later run should meet again.
_LISTED: dict[Verdict, Kind] = {Verdict.FAIL: "failure", Verdict.UNTESTABLE: "failure", Verdict.XFAIL: "failure",
                                Verdict.WARN: "warning", Verdict.INFO: "warning"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    kind: Kind
    check: str | None
    requirement: str | None
    reason: str

    @property
    def name(self) -> str:
        return self.check or self.requirement or ""

    def matches(self, nodeid: str, requirement_id: str) -> bool:
        if self.check is not None:
            return nodeid == self.check or nodeid.endswith(("/" + self.check, "::" + self.check))
        return self.requirement == requirement_id


@dataclass(frozen=True, slots=True)
class Baseline:
    entries: tuple[Entry, ...]

    def match(self, nodeid: str, requirement_id: str) -> Entry | None:
        """The first entry naming this check (by node id, else by requirement), or None."""
        return next((e for e in self.entries if e.matches(nodeid, requirement_id)), None)

    def unmatched(self, checks: list[tuple[str, str]]) -> list[str]:
        """Entries naming no check of this run (renamed, removed, or deselected)."""
        return [entry.name for entry in self.entries if not any(entry.matches(nodeid, rid) for nodeid, rid in checks)]


def stale_entries(baseline: Baseline, records: Iterable[VerdictRecord]) -> list[str]:
    """Entries whose checks all ran and none departed any more: an XPASS, or a warning that went away."""
    stale = []
    for entry in baseline.entries:
        mine = [r for r in records if baseline.match(r.nodeid, r.requirement) is entry]
        if mine and all(r.verdict in (Verdict.PASS, Verdict.XPASS) for r in mine):
            stale.append(f"{entry.name} (expected_{entry.kind})")
    return stale


def load_baseline(path: str, registry: Registry) -> Baseline:
    """Read and validate a baseline file.

    Raises:
        ConfigError: unreadable file, unknown keys or requirement ids, missing reasons.
    """
    data = read_toml(path, "baseline")
    unknown = set(data) - set(_TABLES)
    if unknown:
        raise ConfigError(f"baseline {path}: unknown key {sorted(unknown)[0]!r} (expected_failure or expected_warning)")
    entries = []
    for table, kind in _TABLES.items():
        listed = data.get(table, [])
        if not isinstance(listed, list):
            raise ConfigError(f"baseline {path}: {table} must be an array of tables [[{table}]]")
        for index, raw in enumerate(listed):
            entries.append(_entry(raw, kind, f"baseline {path}: {table}[{index}]", registry))
    return Baseline(tuple(entries))


def _entry(raw: object, kind: Kind, where: str, registry: Registry) -> Entry:
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
    return Entry(kind=kind, check=check, requirement=requirement, reason=reason.strip())


def write_baseline(results: Mapping[str, object]) -> str:
    """A baseline file listing every departure of a run (``results.json`` as loaded).

    FAIL, UNTESTABLE and XFAIL checks become ``expected_failure``, WARN and INFO checks
    ``expected_warning``, each with the reason the run gave (an XFAIL keeps its baseline's).
    PASS, SKIP, XPASS (a stale entry), UNKNOWN (nothing was concluded) and ERROR (the kit's own
    bug) are left out.

    Raises:
        ConfigError: the results are not a run's ``results.json``.
    """
    records = results.get("records")
    if not isinstance(records, list):
        raise ConfigError("the file is not a run's results.json (it has no list of records)")
    tables: dict[str, list[dict[str, str]]] = {"expected_failure": [], "expected_warning": []}
    for raw in records:
        try:
            record = VerdictRecord.from_json(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the file is not a run's results.json (a record is unreadable: {exc})") from None
        kind = _LISTED.get(record.verdict)
        if kind is None:
            continue
        reason = (record.baseline if record.verdict is Verdict.XFAIL and record.baseline else record.reason).strip()
        tables[f"expected_{kind}"].append({"check": record.check,
                                           "reason": reason or f"{record.verdict} in the recorded run"})
    header = (f"# Written by `aidememo-conformance baseline write` from a run of profile {results.get('profile')} "
              f"against {results.get('target')} (seed {results.get('seed')}).\n"
              "# Each entry names one check and why it departed then; remove an entry once it is fixed.\n")
    return header + tomli_w.dumps({name: entries for name, entries in tables.items() if entries})


def read_results(path: str) -> dict[str, object]:
    """Load a ``results.json``.

    Raises:
        ConfigError: unreadable, or not JSON.
    """
    try:
        data = loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a run's results.json")
    return data
