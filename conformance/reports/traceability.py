"""Requirement by requirement: tested, not scored, untested or excluded.

A requirement is *tested* when at least one of its checks produced a scored verdict, *not
scored* when all its checks were skipped (capability unclaimed, identities unavailable),
*untested* when no check exists or none was selected, *excluded* when the registry says why
it is deliberately unchecked. An untested or not-scored MUST is listed in every summary.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from conformance.registry import Registry

__all__ = ["render_listing", "trace"]

_FAILING = {"FAIL", "UNTESTABLE", "UNKNOWN", "XPASS", "ERROR"}


def trace(registry: Registry, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per requirement with its status, worst verdict and checks."""
    by_requirement: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_requirement[record["requirement"]].append(record)
    rows = []
    for requirement in registry:
        mine = by_requirement.get(requirement.id, [])
        verdicts = [r["verdict"] for r in mine]
        scored = [v for v in verdicts if v != "SKIP"]
        if requirement.excluded:
            status = "excluded"
        elif not mine:
            status = "untested"
        elif not scored:
            status = "not scored"
        else:
            status = "tested"
        worst = next((v for v in ("ERROR", "XPASS", "UNKNOWN", "UNTESTABLE", "FAIL", "XFAIL", "WARN", "INFO", "PASS")
                      if v in scored), None)
        rows.append({
            "id": requirement.id,
            "profile": requirement.profile,
            "level": str(requirement.level),
            "capability": requirement.capability,
            "text": requirement.text,
            "source": requirement.source,
            "status": status,
            "verdict": worst or ("SKIP" if mine else None),
            "excluded": requirement.excluded,
            "checks": [r["nodeid"] for r in mine],
            "holds": status == "tested" and worst not in _FAILING,
        })
    return rows


def render_listing(registry: Registry, collected: list[tuple[str, str]]) -> str:
    """The ``--aidememo-list`` dry run: every requirement and the checks that prove it."""
    checks: dict[str, list[str]] = defaultdict(list)
    for nodeid, requirement_id in collected:
        checks[requirement_id].append(nodeid.split("::", 1)[-1])
    lines = ["", f"{'requirement':<14} {'level':<6} {'capability':<13} checks"]
    for requirement in registry:
        names = checks.get(requirement.id, [])
        lines.append(f"{requirement.id:<14} {requirement.level:<6} {requirement.capability:<13} "
                     f"{len(names) if names else 'UNTESTED'}")
        lines.append(f"    {requirement.text}")
        lines.extend(f"      - {name}" for name in names)
    untested = [r.id for r in registry if r.level == "MUST" and not checks.get(r.id) and not r.excluded]
    lines.append(f"\n{sum(len(v) for v in checks.values())} checks; untested MUSTs: {', '.join(untested) or 'none'}\n")
    return "\n".join(lines) + "\n"
