"""Reports of one run: results.json, traceability.json, report.html and the terminal summary."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from conformance.registry import Registry
from conformance.reports.baseline import Baseline
from conformance.reports.html_report import render_html
from conformance.reports.traceability import trace, unscored_clauses
from conformance.transcript import replay_script
from conformance.verdicts import Verdict, VerdictRecord

__all__ = ["RunInfo", "render_summary", "write_reports"]

_SHOWN_FAILURES = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """What the reports say about the run besides its records."""

    profile: str
    title: str  # the profile's protocol, for headings
    target: str
    mode: str
    seed: int
    run_tag: str
    registry: Registry
    baseline: Baseline | None
    rerun: Callable[[str], str]  # check selector -> the command that replays it


def _kit() -> str:
    try:
        return f"aidememo-conformance {metadata.version('aidememo-conformance')}"
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "aidememo-conformance (not installed)"


def write_reports(report_dir: Path, run: RunInfo, records: list[VerdictRecord]) -> dict[str, Any]:
    """Write every report and return the summary the terminal shows."""
    records = sorted(records, key=lambda r: (r.requirement, r.nodeid))
    # Every worker reports the same claims; keep one copy for the summary.
    capabilities = next((r.claims for r in records if r.claims), {})
    records = [dataclasses.replace(r, claims={}, rerun=run.rerun(r.check),
                                   replay=replay_script(list(r.transcript), list(r.notes)) if r.transcript else "")
               for r in records]
    rows = trace(run.registry, records)
    counts = Counter(r.verdict for r in records)
    must_rows = [row for row in rows if row["level"] == "MUST"]
    failures = sorted((r for r in records if not r.ok or r.verdict is Verdict.WARN), key=lambda r: -r.severity)
    summary: dict[str, Any] = {
        "kit": _kit(),
        "profile": run.profile,
        "title": run.title,
        "target": run.target,
        "mode": run.mode,
        "seed": run.seed,
        "run_tag": run.run_tag,
        "counts": {str(v): counts.get(v, 0) for v in Verdict},
        "capabilities": capabilities,
        "requests": sum(r.requests for r in records),
        "untested_musts": [row["id"] for row in must_rows if row["status"] == "untested"],
        "not_scored_musts": [row["id"] for row in must_rows if row["status"] == "not scored"],
        "untested_clauses": unscored_clauses(rows),
        "ok": all(r.ok for r in records),
        "unmatched_baseline": run.baseline.unmatched([(r.nodeid, r.requirement) for r in records])
        if run.baseline else [],
        "report_dir": str(report_dir),
    }
    report_dir.mkdir(parents=True, exist_ok=True)
    results = {**summary, "records": [_public(r) for r in records]}
    (report_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf-8")
    (report_dir / "traceability.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", "utf-8")
    (report_dir / "report.html").write_text(render_html(summary, rows, records, failures), "utf-8")
    summary["failures"] = failures
    return summary


def _public(record: VerdictRecord) -> dict[str, object]:
    data = record.to_json()
    data.pop("claims")  # the run's claims are in the summary
    for name in ("transcript", "notes", "replay"):
        if not data[name]:
            data.pop(name)
    return data


def render_summary(summary: dict[str, Any]) -> str:
    """One screen: counts per verdict, untested MUSTs, report paths, how to rerun a failure."""
    counts = summary["counts"]
    shown = "  ".join(f"{v} {n}" for v, n in counts.items() if n)
    lines = [
        "",
        f"===== {summary['title']} conformance (profile {summary['profile']}) against {summary['target']} =====",
        f"verdicts: {shown or 'none'}   requests: {summary['requests']}   seed: {summary['seed']}",
        "capabilities: " + ("; ".join(f"{name} {how.split(',')[0]}" for name, how in summary["capabilities"].items())
                            or "unknown"),
        f"untested MUSTs (no check of theirs ran): {', '.join(summary['untested_musts']) or 'none'}",
        f"not scored MUSTs (capability unclaimed or identities unavailable): "
        f"{', '.join(summary['not_scored_musts']) or 'none'}",
    ]
    if summary.get("untested_clauses"):
        lines.append(f"MUST clauses no scored check read: {', '.join(summary['untested_clauses'])}")
    if summary["unmatched_baseline"]:
        lines.append(f"baseline entries naming no check of this run: {', '.join(summary['unmatched_baseline'])}")
    failures: list[VerdictRecord] = [f for f in summary["failures"] if not f.ok]
    for failure in failures[:_SHOWN_FAILURES]:
        lines.append(f"  {failure.verdict:<10} {failure.requirement:<13} {failure.check}")
        lines.append(f"             {failure.reason.splitlines()[0][:150] if failure.reason else ''}")
    if len(failures) > _SHOWN_FAILURES:
        lines.append(f"  ... and {len(failures) - _SHOWN_FAILURES} more (see the report)")
    if failures:
        lines.append(f"rerun one: {failures[0].rerun}")
    report_dir = Path(summary["report_dir"])
    lines.append(f"reports: {report_dir / 'report.html'}  {report_dir / 'results.json'}  "
                 f"{report_dir / 'traceability.json'}")
    lines.append("RESULT: " + ("every scored MUST holds" if summary["ok"] else "a scored MUST does not hold"))
    return "\n".join(lines) + "\n"
