"""Reports of one run: results.json, traceability.json, report.html and the terminal summary."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.reports.html_report import render_html
from conformance.reports.traceability import trace
from conformance.transcript import curl_script

__all__ = ["render_summary", "rerun_command", "write_reports"]

_NOT_OK = ("FAIL", "UNTESTABLE", "UNKNOWN", "XPASS", "ERROR")
_SEVERITY = ("FAIL", "ERROR", "XPASS", "UNKNOWN", "UNTESTABLE", "WARN")
VERDICT_ORDER = ("PASS", "FAIL", "WARN", "INFO", "SKIP", "UNTESTABLE", "UNKNOWN", "XFAIL", "XPASS", "ERROR")


def check_selector(nodeid: str) -> str:
    """``test_module.py::test_name[param]``: how the CLI names one check wherever it is installed."""
    return nodeid.rsplit("/", 1)[-1]


def rerun_command(state: Any, nodeid: str) -> str:
    """The one command that replays a check against the same target with the same seed."""
    settings = state.settings
    parts = ["aidememo-conformance", "run"]
    if settings.url:
        parts += ["--url", settings.url]
    if settings.origin != "defaults":
        parts += ["--config", settings.origin]
    if settings.provision_command and settings.origin == "defaults":
        parts += ["--provision-command", settings.provision_command]
    parts += ["--seed", str(state.seed), check_selector(nodeid)]
    return " ".join(shlex.quote(p) for p in parts)


def write_reports(report_dir: Path, state: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Write every report and return the summary the terminal shows."""
    records = sorted(records, key=lambda r: (r["requirement"], r["nodeid"]))
    # Every worker reports the same claims; keep one copy for the summary.
    capabilities: dict[str, Any] = next((r["claims"] for r in records if r.get("claims")), {})
    for record in records:
        record.pop("claims", None)
        record["rerun"] = rerun_command(state, record["nodeid"])
        if "transcript" in record:
            record["curl"] = curl_script(record["transcript"], record.get("notes"))
    rows = trace(state.registry, records)
    counts = Counter(r["verdict"] for r in records)
    must_rows = [row for row in rows if row["level"] == "MUST"]
    summary: dict[str, Any] = {
        "kit": "aidememo-conformance 0.1.0",
        "profile": "aidememo-remote",
        "target": state.settings.url or "embedded reference",
        "mode": state.settings.mode,
        "seed": state.seed,
        "run_tag": state.run_tag,
        "counts": {v: counts.get(v, 0) for v in VERDICT_ORDER},
        "capabilities": capabilities,
        "requests": sum(r.get("requests", 0) for r in records),
        "untested_musts": [row["id"] for row in must_rows if row["status"] == "untested"],
        "not_scored_musts": [row["id"] for row in must_rows if row["status"] == "not scored"],
        "ok": not any(counts.get(v, 0) for v in _NOT_OK),
        "unmatched_baseline": state.baseline.unmatched([(r["nodeid"], r["requirement"]) for r in records])
        if state.baseline else [],
        "report_dir": str(report_dir),
        "failures": sorted((r for r in records if r["verdict"] in _NOT_OK or r["verdict"] == "WARN"),
                           key=lambda r: _SEVERITY.index(r["verdict"])),
    }
    report_dir.mkdir(parents=True, exist_ok=True)
    results = {**{k: v for k, v in summary.items() if k != "failures"}, "records": records}
    (report_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf-8")
    (report_dir / "traceability.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", "utf-8")
    (report_dir / "report.html").write_text(render_html(summary, rows, records), "utf-8")
    return summary


def render_summary(summary: dict[str, Any]) -> str:
    """One screen: counts per verdict, untested MUSTs, report paths, how to rerun a failure."""
    counts = summary["counts"]
    shown = "  ".join(f"{v} {counts[v]}" for v in VERDICT_ORDER if counts[v])
    lines = [
        "",
        f"===== AideMemo conformance ({summary['profile']}) against {summary['target']} =====",
        f"verdicts: {shown or 'none'}   requests: {summary['requests']}   seed: {summary['seed']}",
        "capabilities: " + ("; ".join(f"{name} {how.split(',')[0]}" for name, how in summary["capabilities"].items())
                            or "unknown"),
        f"untested MUSTs (no check of theirs ran): {', '.join(summary['untested_musts']) or 'none'}",
        f"not scored MUSTs (capability unclaimed or identities unavailable): "
        f"{', '.join(summary['not_scored_musts']) or 'none'}",
    ]
    if summary["unmatched_baseline"]:
        lines.append(f"baseline entries naming no check of this run: {', '.join(summary['unmatched_baseline'])}")
    failures = [f for f in summary["failures"] if f["verdict"] != "WARN"]
    for failure in failures[:12]:
        lines.append(f"  {failure['verdict']:<10} {failure['requirement']:<13} {failure['nodeid'].rsplit('/', 1)[-1]}")
        lines.append(f"             {failure['reason'].splitlines()[0][:150] if failure['reason'] else ''}")
    if len(failures) > 12:
        lines.append(f"  ... and {len(failures) - 12} more (see the report)")
    if failures:
        lines.append(f"rerun one: {failures[0]['rerun']}")
    report_dir = Path(summary["report_dir"])
    lines.append(f"reports: {report_dir / 'report.html'}  {report_dir / 'results.json'}  "
                 f"{report_dir / 'traceability.json'}")
    lines.append("RESULT: " + ("every scored MUST holds" if summary["ok"] else "a scored MUST does not hold"))
    return "\n".join(lines) + "\n"
