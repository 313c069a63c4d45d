"""Requirement by requirement: tested, not scored, untested or excluded.

A requirement is *tested* when at least one of its checks produced a scored verdict, *not
scored* when all its checks were skipped (capability unclaimed, identities unavailable),
*not selected* when it has checks but the run selected none of them (a rerun of one check),
*untested* when no check exists for it, *excluded* when the registry says why it is
deliberately unchecked. An untested or not-scored MUST is listed in every summary.

A requirement with clauses gets the same status per clause, from the checks that read that
clause: a sentence is only as tested as its least-read promise.

Beside them stand the upstream guards (the profile's ``guards.toml``) that name each requirement
or clause, so a reader sees which of upstream's checks a verdict speaks for.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import cast

from conformance.registry import Registry, Requirement, UpstreamGuard
from conformance.verdicts import Verdict, VerdictRecord

__all__ = ["render_listing", "trace", "unread_clauses", "unread_guards", "unscored_clauses"]

Collected = tuple[str, str, tuple[str, ...]]  # (node id, requirement id, the clauses the check reads)


def _status(excluded: str | None, mine: list[VerdictRecord], has_checks: bool) -> tuple[str, Verdict | None]:
    scored = [r.verdict for r in mine if r.verdict.scored]
    if excluded:
        status = "excluded"
    elif not mine:
        status = "not selected" if has_checks else "untested"
    elif not scored:
        status = "not scored"
    else:
        status = "tested"
    worst = max(scored, key=lambda v: v.severity) if scored else (Verdict.SKIP if mine else None)
    return status, worst


def _guard(guard: UpstreamGuard) -> dict[str, object]:
    return {"id": guard.id, "upstream": guard.upstream, "function": guard.function, "rule": guard.rule,
            "unreachable": guard.unreachable}


def _guards_of(registry: Registry, requirement_id: str, clause: str | None = None) -> list[dict[str, object]]:
    """The upstream guards naming the requirement (any of its clauses), or exactly ``clause``."""
    return [_guard(g) for g in registry.guards
            if any(rid == requirement_id and (clause is None or c == clause) for rid, c in g.reads)]


def _clause_rows(registry: Registry, requirement: Requirement, mine: list[VerdictRecord],
                 has_checks: bool) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for clause in requirement.clauses:
        readers = [r for r in mine if clause.id in r.clauses]
        status, worst = _status(requirement.excluded, readers, has_checks and not mine)
        rows.append({"id": clause.id, "text": clause.text, "status": status,
                     "verdict": str(worst) if worst is not None else None, "checks": [r.nodeid for r in readers],
                     "guards": [g["id"] for g in _guards_of(registry, requirement.id, clause.id)]})
    return rows


def trace(registry: Registry, records: list[VerdictRecord],
          checked: Callable[[], frozenset[str]] | None = None) -> list[dict[str, object]]:
    """One row per requirement with its status, worst verdict, checks and clauses.

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
        selectable = requirement.id in has_checks
        status, worst = _status(requirement.excluded, mine, selectable)
        clauses = _clause_rows(registry, requirement, mine, selectable)
        if status == "tested" and any(c["status"] != "tested" for c in clauses):
            status = "partly tested"  # some promise of the sentence had no scored check
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
            "clauses": clauses,
            "guards": _guards_of(registry, requirement.id),
            "holds": status in ("tested", "partly tested") and all(v.ok for v in scored),
        })
    return rows


def unscored_clauses(rows: list[dict[str, object]]) -> list[str]:
    """``ID:clause`` of every clause of a partly tested MUST that no scored check read."""
    return [f"{row['id']}:{clause['id']}" for row in rows if row["level"] == "MUST" and row["status"] == "partly tested"
            for clause in cast(list[dict[str, object]], row["clauses"]) if clause["status"] != "tested"]


def unread_clauses(registry: Registry, collected: list[Collected]) -> list[str]:
    """``ID:clause`` (or ``ID`` for a one-promise requirement) of everything no collected check reads."""
    read = {(rid, clause) for _, rid, clauses in collected for clause in (*clauses, "")}
    missing = []
    for requirement in registry:
        if requirement.excluded:
            continue
        if not requirement.clauses and (requirement.id, "") not in read:
            missing.append(requirement.id)
        missing += [f"{requirement.id}:{c.id}" for c in requirement.clauses if (requirement.id, c.id) not in read]
    return missing


def unread_guards(registry: Registry, collected: list[Collected]) -> list[str]:
    """The upstream guards none of whose requirements (or clauses) a collected check reads."""
    unread = set(unread_clauses(registry, collected))
    return [g.id for g in registry.guards if all((f"{rid}:{c}" if c else rid) in unread for rid, c in g.reads)]


def render_listing(registry: Registry, collected: list[Collected]) -> str:
    """The ``--aidememo-list`` dry run: every requirement, its clauses, and the checks that read each."""
    checks: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for nodeid, requirement_id, clauses in collected:
        checks[requirement_id].append((nodeid.split("::", 1)[-1], clauses))
    lines = ["", f"{'requirement':<14} {'level':<6} {'capability':<13} checks"]
    for requirement in registry:
        mine = checks.get(requirement.id, [])
        basis = f" [{requirement.basis}]" if requirement.basis else ""
        lines.append(f"{requirement.id:<14} {requirement.level:<6} {requirement.capability:<13} "
                     f"{len(mine) if mine else 'UNTESTED'}")
        lines.append(f"    {requirement.text}{basis}")
        if not requirement.clauses:
            lines.extend(f"      - {name}" for name, _ in mine)
        for clause in requirement.clauses:
            readers = [name for name, clauses in mine if clause.id in clauses]
            lines.append(f"    [{clause.id}] {clause.text}{'' if readers else '   <- NO CHECK READS THIS'}")
            lines.extend(f"      - {name}" for name in readers)
    untested = [r.id for r in registry if r.level == "MUST" and not checks.get(r.id) and not r.excluded]
    unread = unread_clauses(registry, collected)
    if registry.guards:
        lines.append(f"\n{'upstream guard':<30} {'read by':<40} where upstream")
        for guard in registry.guards:
            read = ", ".join(f"{rid}:{c}" if c else rid for rid, c in guard.reads)
            lines.append(f"{guard.id:<30} {read:<40} {guard.upstream} {guard.function}"
                         f"{'  (unreachable alone)' if guard.unreachable else ''}")
        lines.append(f"upstream guards no check reads: {', '.join(unread_guards(registry, collected)) or 'none'}")
    lines.append(f"\n{len(collected)} checks; untested MUSTs: {', '.join(untested) or 'none'}; "
                 f"clauses no check reads: {', '.join(unread) or 'none'}\n")
    return "\n".join(lines) + "\n"
