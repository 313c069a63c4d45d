"""Reports of one run: results.json, traceability.json, report.html and the terminal summary."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from conformance.registry import Registry
from refkit.version import PROTOCOL_COMMIT, VERSION
from conformance.reports.baseline import Baseline, stale_entries
from conformance.reports.html_report import render_html
from conformance.reports.modes import explain_mode
from conformance.reports.junit import render_junit
from conformance.reproduction.record import RecordError
from conformance.reproduction.script import render_script
from conformance.reproduction.suite import Expectations, ReplayTarget, from_verdict
from conformance.reports.traceability import trace, unscored_clauses
from conformance.verdicts import Verdict, VerdictRecord
from refkit.files import write_atomic

__all__ = ["RunInfo", "explain_mode", "provenance", "render_summary", "result_line", "write_reports"]

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
    checked: Callable[[], frozenset[str]] | None = None  # requirement ids that have checks (see trace)
    replay: ReplayTarget | None = None  # how a case file's script reaches and provisions the target
    health: object = None  # the target's answer to GET /health (None: no check started it)
    protocol_commit: str | None = None  # the upstream commit the profile's requirements follow
    expectations: Expectations | None = None  # the profile's oracle for reproductions (None: the checks' own)


def _kit() -> str:
    return f"aidememo-conformance {VERSION}"


def provenance(health: object, protocol_commit: str | None = PROTOCOL_COMMIT) -> dict[str, object]:
    """What every report says of what judged what: the kit's version, the upstream protocol commit
    the requirements follow (None for a profile whose sources are documents), and the target's own
    ``/health`` answer."""
    return {"kit": _kit(), "kit_version": VERSION, "protocol_commit": protocol_commit, "health": health}


def write_reports(report_dir: Path, run: RunInfo, records: list[VerdictRecord]) -> dict[str, Any]:
    """Write every report and return the summary the terminal shows."""
    records = sorted(records, key=lambda r: (r.requirement, r.nodeid))
    # Every worker reports the same claims; keep one copy for the summary.
    capabilities = next((r.claims for r in records if r.claims), {})
    records = [dataclasses.replace(r, claims={}, rerun=run.rerun(r.check)) for r in records]
    records = _write_reproductions(report_dir, run, records)
    rows = trace(run.registry, records, run.checked)
    counts = Counter(r.verdict for r in records)
    must_rows = [row for row in rows if row["level"] == "MUST"]
    failures = sorted((r for r in records if not r.ok or r.verdict in (Verdict.WARN, Verdict.INFO)),
                      key=lambda r: -r.severity)
    summary: dict[str, Any] = {
        **provenance(run.health, run.protocol_commit),
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
        "not_selected_musts": [row["id"] for row in must_rows if row["status"] == "not selected"],
        "not_scored_musts": [row["id"] for row in must_rows if row["status"] == "not scored"],
        "untested_clauses": unscored_clauses(rows),
        "ok": all(r.ok for r in records),
        "unmatched_baseline": run.baseline.unmatched([(r.nodeid, r.requirement) for r in records])
        if run.baseline else [],
        "stale_baseline": stale_entries(run.baseline, records) if run.baseline else [],
        # Claimed, yet every check of it was skipped (a store that answers 503 unavailable, say).
        "unscored_claims": sorted(name for name, how in capabilities.items() if how.startswith("claimed")
                                  and (mine := [r for r in records if r.capability == name])
                                  and all(r.verdict is Verdict.SKIP for r in mine)),
        "report_dir": str(report_dir),
    }
    summary["result"] = result_line(summary, [r for r in failures if not r.ok])
    report_dir.mkdir(parents=True, exist_ok=True)
    results = {**summary, "records": [_public(r) for r in records]}
    write_atomic(report_dir / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_atomic(report_dir / "traceability.json", json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    write_atomic(report_dir / "report.html", render_html(summary, rows, records, failures))
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_atomic(report_dir / "junit.xml", render_junit(summary, records, stamp))
    summary["failures"] = failures
    return summary


def _write_reproductions(report_dir: Path, run: RunInfo, records: list[VerdictRecord]) -> list[VerdictRecord]:
    """Each record with a transcript gets its reproduction record and script, written under
    ``report_dir/reproductions``; the record names them (``script``, ``replay``)."""
    out = []
    folder = report_dir / "reproductions"
    for record in records:
        if not record.transcript:
            out.append(record)
            continue
        try:
            repro = from_verdict(record, run.replay or ReplayTarget(url=None), run.expectations)
        except RecordError:  # a transcript no record can state (a credential of no identity): no script
            out.append(record)
            continue
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", record.check.replace(".py::", "__"))[:150]
        folder.mkdir(parents=True, exist_ok=True)
        data, script = folder / f"{stem}.json", folder / f"{stem}.sh"
        write_atomic(data, repro.dumps())
        write_atomic(script, render_script(repro), mode=0o755)
        replay = (run.replay or ReplayTarget(url=None)).reproduce_command(repro, data)
        out.append(dataclasses.replace(record, script=str(script.resolve()), replay=replay))
    return out


def _public(record: VerdictRecord) -> dict[str, object]:
    data = record.to_json()
    data.pop("claims")  # the run's claims are in the summary
    for name in ("transcript", "notes", "replay", "script", "baseline", "expected", "namespace", "ids", "identities"):
        if not data[name]:
            data.pop(name)
    if data["failed_step"] is None:
        data.pop("failed_step")
    return data


_WIDTH = 100  # terminal lines wrap here; a reason is never cut, only wrapped
_REASON_LINES = 12  # beyond this a reason's tail is in the report (cut at a line, never in a value)


def _wrapped(text: str, indent: str) -> list[str]:
    """``text`` wrapped at ``_WIDTH`` between words, a word never split (a long value keeps its line)."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines += textwrap.wrap(paragraph, _WIDTH, initial_indent=indent, subsequent_indent=indent,
                               break_long_words=False, break_on_hyphens=False) or [indent]
    if len(lines) > _REASON_LINES:
        lines = lines[:_REASON_LINES] + [f"{indent}... ({len(lines) - _REASON_LINES} more lines in the report)"]
    return lines


def _listed(label: str, ids: list[str]) -> list[str]:
    return _wrapped(f"{label}: {', '.join(ids) or 'none'}", "")


def render_summary(summary: dict[str, Any]) -> str:
    """One screen: counts per verdict, what is untested, each failure and warning with its whole
    reason, how to rerun one, where the reports are, and one RESULT line."""
    counts = summary["counts"]
    shown = "  ".join(f"{v} {n}" for v, n in counts.items() if n)
    unscored = set(summary.get("unscored_claims", ()))
    capabilities = "; ".join(f"{name} {how.split(',')[0]}" + (" but not scored (its checks were skipped)"
                                                              if name in unscored else "")
                             for name, how in summary["capabilities"].items())
    lines = [
        "",
        f"===== {summary['title']} conformance (profile {summary['profile']}) against {summary['target']} =====",
        f"verdicts: {shown or 'none'}   requests: {summary['requests']}   seed: {summary['seed']}",
        *_wrapped(f"capabilities: {capabilities or 'unknown'}", ""),
        *_listed("untested MUSTs (no check exists)", summary["untested_musts"]),
        *_listed("not scored MUSTs (capability unclaimed or identities unavailable)", summary["not_scored_musts"]),
    ]
    if summary.get("untested_clauses"):
        lines += _listed("MUST clauses no scored check read", summary["untested_clauses"])
    if summary.get("not_selected_musts"):
        lines.append(f"MUSTs whose checks this run did not select: {len(summary['not_selected_musts'])} "
                     "(traceability.json lists them)")
    if summary["unmatched_baseline"]:
        lines += _listed("baseline entries naming no check of this run", summary["unmatched_baseline"])
    if summary.get("stale_baseline"):
        lines += _listed("stale baseline entries (their checks pass now: remove them)", summary["stale_baseline"])
    failures: list[VerdictRecord] = [f for f in summary["failures"] if not f.ok]
    warnings: list[VerdictRecord] = [f for f in summary["failures"] if f.ok]
    for record in failures[:_SHOWN_FAILURES]:
        lines.append(f"  {record.verdict:<10} {record.requirement:<13} {record.check}")
        lines += _wrapped(record.reason, " " * 13)
    if len(failures) > _SHOWN_FAILURES:
        lines.append(f"  ... and {len(failures) - _SHOWN_FAILURES} more (see the report)")
    for record in warnings[:_SHOWN_FAILURES]:
        known = " (expected by the baseline)" if record.baseline else ""
        lines.append(f"  {record.verdict:<10} {record.requirement:<13} {record.check}{known}")
        lines += _wrapped(record.reason, " " * 13)
    if len(warnings) > _SHOWN_FAILURES:
        lines.append(f"  ... and {len(warnings) - _SHOWN_FAILURES} more warnings (see the report)")
    if failures:
        lines.append(f"rerun one: {failures[0].rerun}")
    report_dir = Path(summary["report_dir"])
    lines.append(f"reports: {report_dir / 'report.html'}  {report_dir / 'results.json'}  "
                 f"{report_dir / 'traceability.json'}  {report_dir / 'junit.xml'}")
    lines.append(f"RESULT: {summary['result']}")
    return "\n".join(lines) + "\n"


def result_line(summary: dict[str, Any], failures: list[VerdictRecord]) -> str:
    """What the run's outcome means, by the verdicts that made it fail (``failures``: the records that are not ok)."""
    if summary["ok"]:
        return "every scored MUST holds"
    verdicts = {r.verdict for r in failures}
    if Verdict.FAIL in verdicts:
        return "a scored MUST does not hold"
    parts = []
    if verdicts & {Verdict.UNTESTABLE, Verdict.UNKNOWN}:
        parts.append("some checks could not reach their point (UNTESTABLE or UNKNOWN): nothing is proven either way")
    if Verdict.ERROR in verdicts:
        parts.append("the kit itself broke in some checks (ERROR): a bug to report, not a verdict on the target")
    if Verdict.XPASS in verdicts:
        parts.append("stale baseline entries (XPASS): the checks they excuse pass now; remove the entries")
    return "; ".join(parts) or "the run failed"
