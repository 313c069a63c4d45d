"""Requirement by requirement: tested, not scored, untested or excluded.

A requirement is *tested* when at least one of its checks produced a scored verdict, *not
scored* when all its checks were skipped (capability unclaimed, identities unavailable),
*not selected* when it has checks but the run selected none of them (a rerun of one check),
*untested* when no check exists for it, *excluded* when the registry says why it is
deliberately unchecked. An untested or not-scored MUST is listed in every summary.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from conformance.registry import Registry
from conformance.verdicts import Verdict, VerdictRecord

__all__ = ["render_listing", "trace"]


def trace(registry: Registry, records: list[VerdictRecord],
          checked: Callable[[], frozenset[str]] | None = None) -> list[dict[str, object]]:
    """One row per requirement with its status, worst verdict and checks.

    Args:
        checked: the ids that have checks at all (asked only when some requirement ran no check);
            without it, every requirement that ran no check is untested.
    """
    by_requirement: dict[str, list[VerdictRecord]] = defaultdict(list)
    for record in records:
        by_requirement[record.requirement].append(record)
    rows: list[dict[str, object]] = []
    idle = any(r.id not in by_requirement and not r.excluded for r in registry)
    has_checks = checked() if checked is not None and idle else frozenset()
    for requirement in registry:
        mine = by_requirement.get(requirement.id, [])
        scored = [r.verdict for r in mine if r.verdict.scored]
        if requirement.excluded:
            status = "excluded"
        elif not mine:
            status = "not selected" if requirement.id in has_checks else "untested"
        elif not scored:
            status = "not scored"
        else:
            status = "tested"
        worst = max(scored, key=lambda v: v.severity) if scored else (Verdict.SKIP if mine else None)
        rows.append({
            "id": requirement.id,
            "profile": requirement.profile,
            "level": str(requirement.level),
            "capability": requirement.capability,
            "text": requirement.text,
            "source": requirement.source,
            "basis": requirement.basis,
            "status": status,
            "verdict": str(worst) if worst is not None else None,
            "excluded": requirement.excluded,
            "checks": [r.nodeid for r in mine],
            "holds": status == "tested" and all(v.ok for v in scored),
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
        basis = f" [{requirement.basis}]" if requirement.basis else ""
        lines.append(f"{requirement.id:<14} {requirement.level:<6} {requirement.capability:<13} "
                     f"{len(names) if names else 'UNTESTED'}")
        lines.append(f"    {requirement.text}{basis}")
        lines.extend(f"      - {name}" for name in names)
    untested = [r.id for r in registry if r.level == "MUST" and not checks.get(r.id) and not r.excluded]
    lines.append(f"\n{sum(len(v) for v in checks.values())} checks; untested MUSTs: {', '.join(untested) or 'none'}\n")
    return "\n".join(lines) + "\n"
