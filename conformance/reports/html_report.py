"""One self-contained HTML file (inline CSS and JS, no network) per run.

Top: verdict counts and a capability x level table. Then every requirement with its status.
Then one case file per failure or warning: the requirement sentence, the verdict and why,
the redacted request/response transcript, the pytest node id, the rerun command and a curl
script.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from html import escape
from typing import Any

from conformance.reports.modes import explain_mode
from conformance.verdicts import VerdictRecord

__all__ = ["REPORT_CSS", "provenance_html", "render_html"]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1d1d1f;max-width:1200px}
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
.v{font-weight:600;padding:1px 6px;border-radius:3px}
.PASS{background:#d8f5d8}.FAIL,.ERROR,.XPASS{background:#f8d0d0}.UNTESTABLE,.UNKNOWN{background:#fbe3c0}
.WARN,.INFO{background:#fff3b8}.SKIP,.XFAIL{background:#e6e6e6}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all;font-size:12px}
details{margin:.5em 0}.case{border:1px solid #ccc;border-radius:4px;padding:.3em 1em;margin:1em 0}
.req{font-style:italic}.muted{color:#666}
.failed-step{border-left:4px solid #c0392b;padding-left:.5em}.failed{color:#c0392b}
.vs td{font-family:monospace}
"""

REPORT_CSS = _CSS  # the look other reports (diff.html) share

_JS = """
function only(status){document.querySelectorAll('#reqs tbody tr').forEach(function(r){
r.style.display=(!status||r.dataset.status===status)?'':'none';});}
"""


def provenance_html(summary: dict[str, Any]) -> str:
    """The line naming the kit, the upstream protocol commit it follows and the target's ``/health`` answer."""
    import json

    health = summary.get("health")
    answer = "no answer recorded" if health is None else json.dumps(health, ensure_ascii=False, sort_keys=True)
    commit = summary.get("protocol_commit")
    follows = f", following the protocol at upstream commit <code>{escape(str(commit))}</code>" if commit else ""
    return (f"<p class='muted'>{escape(str(summary.get('kit', '')))}{follows}; the target's "
            f"<code>/health</code> answered <code>{escape(answer)}</code>.</p>")


def _verdict(v: str | None) -> str:
    return f'<span class="v {escape(v or "")}">{escape(v or "-")}</span>'


def _received(entry: dict[str, Any]) -> str:
    if entry.get("kind", "http") == "http":
        return f"HTTP {entry.get('status') or 'no answer'}"
    return f"exit {entry.get('exit_code')}"


def _entry(number: int, entry: dict[str, Any], record: VerdictRecord) -> str:
    """One step: what was sent, what came back; the step that departed is marked, its expected
    answer beside the received one."""
    failed = record.failed_step == number
    expected = str(entry.get("expected") or "")
    head = f"#{number + 1} {escape(str(entry.get('summary', '')))}"
    if failed:
        head = f"<b class='failed'>&#9654; the check failed here</b> {head}"
    elif expected:
        head += f" <span class='muted'>(expected {escape(expected)})</span>"
    beside = ""
    if failed:
        beside = (f"<table class='vs'><tr><th>expected</th><th>received</th></tr><tr><td>{escape(record.expected)}</td>"
                  f"<td>{escape(_received(entry))}</td></tr></table>")
    return (
        f"<details{' open' if number < 12 or failed else ''} class='step{' failed-step' if failed else ''}'>"
        f"<summary>{head}</summary>{beside}<pre>{escape(str(entry.get('request', '')))}</pre>"
        f"<pre>{escape(str(entry.get('response', '')))}</pre></details>"
    )


def render_html(summary: dict[str, Any], rows: list[dict[str, Any]], records: list[VerdictRecord],
                failures: list[VerdictRecord]) -> str:
    """Render the report; every value from the target is escaped."""
    texts = {row["id"]: row for row in rows}
    grid: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in records:
        grid[(record.capability, str(record.level))][str(record.verdict)] += 1
    capabilities = sorted({cap for cap, _ in grid})
    levels = ("MUST", "SHOULD", "MAY")
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(summary['title'])} conformance report"
        "</title>",
        f"<style>{_CSS}</style><script>{_JS}</script></head><body>",
        f"<h1>{escape(summary['title'])} conformance: {escape(summary['target'])}</h1>",
        f"<p>profile <b>{escape(summary['profile'])}</b>, mode {escape(explain_mode(summary['mode']))}, seed "
        f"<code>{summary['seed']}</code>, run tag <code>{escape(summary['run_tag'])}</code>, "
        f"{summary['requests']} requests.</p>",
        provenance_html(summary),
        f"<p><b>{'Every scored MUST holds.' if summary['ok'] else 'A scored MUST does not hold.'}</b></p>",
        "<p>" + " ".join(f"{_verdict(v)} {n}" for v, n in summary["counts"].items() if n) + "</p>",
        # What to act on comes first: one line per failure or warning, linking to its case below.
        "".join(
            ["<h2>To act on</h2><ul>"]
            + [f"<li><a href='#{escape(r.nodeid)}'>{_verdict(r.verdict)} {escape(r.requirement)}</a> "
               f"{escape(r.nodeid.rsplit('::', 1)[-1])}</li>" for r in failures]
            + ["</ul>"]
        ) if failures else "",
        "<h2>Capabilities</h2><table><tr><th>capability</th><th>claim</th></tr>"
        + "".join(f"<tr><td>{escape(name)}</td><td>{escape(how)}</td></tr>"
                  for name, how in summary.get("capabilities", {}).items())
        + "</table>",
        "<h2>By capability and level</h2><table><tr><th>capability</th>"
        + "".join(f"<th>{lv}</th>" for lv in levels) + "</tr>",
    ]
    for cap in capabilities:
        cells = []
        for level in levels:
            counter = grid.get((cap, level), Counter())
            cells.append("<td>" + " ".join(f"{_verdict(v)} {n}" for v, n in sorted(counter.items())) + "</td>")
        parts.append(f"<tr><td>{escape(cap)}</td>{''.join(cells)}</tr>")
    parts.append("</table>")
    if summary["untested_musts"] or summary["not_scored_musts"]:
        parts.append(f"<p>Untested MUSTs: {escape(', '.join(summary['untested_musts']) or 'none')}<br>"
                     f"Not scored MUSTs: {escape(', '.join(summary['not_scored_musts']) or 'none')}</p>")
    parts.append("<h2>Requirements</h2><p>Show: <a href='#' onclick=\"only('');return false\">all</a> "
                 + " ".join(f"<a href='#' onclick=\"only('{s}');return false\">{s}</a>"
                            for s in ("tested", "partly tested", "not scored", "not selected", "untested", "excluded"))
                 + "</p><table id='reqs'><thead><tr><th>id</th><th>level</th><th>capability</th><th>status</th>"
                 "<th>verdict</th><th>requirement</th></tr></thead><tbody>")
    for row in rows:
        parts.append(
            f"<tr data-status='{escape(row['status'])}'><td>{escape(row['id'])}</td><td>{row['level']}</td>"
            f"<td>{escape(row['capability'])}</td><td>{escape(row['status'])}</td><td>{_verdict(row['verdict'])}</td>"
            f"<td>{escape(row['text'])}<div class='muted'>{escape(row['source'])}"
            f"{' &middot; ' + escape(row['basis']) if row.get('basis') else ''} &middot; "
            f"{len(row['checks'])} check(s)</div></td></tr>")
    parts.append("</tbody></table><h2>Failures and warnings</h2>")
    if not failures:
        parts.append("<p>None.</p>")
    parts.extend(_case(record, texts.get(record.requirement, {})) for record in failures)
    parts.append("</body></html>\n")
    return "".join(parts)


def _case(record: VerdictRecord, row: dict[str, Any]) -> str:
    """The case file of one failure or warning."""
    parts = [
        f"<div class='case' id='{escape(record.nodeid)}'><h3>{_verdict(record.verdict)} "
        f"{escape(record.requirement)} ({record.level}) &mdash; "
        f"{escape(record.nodeid.rsplit('::', 1)[-1])}</h3>"
        f"<p class='req'>{escape(row.get('text', ''))}</p>"
        f"<p><b>Why:</b></p><pre>{escape(record.reason)}</pre>"
        + (f"<p><b>Baseline:</b> {escape(record.baseline)}</p>" if record.baseline else "") +
        f"<p><b>pytest node id:</b> <code>{escape(record.nodeid)}</code><br>"
        f"<b>Rerun:</b> <code>{escape(record.rerun)}</code></p>",
        f"<p><b>Transcript</b> ({len(record.transcript)} steps, tokens redacted):</p>"]
    if record.failed_step is None and record.transcript and not record.ok:
        parts.append("<p class='muted'>The check's own assertion judged the steps below (no single step is "
                     "marked); the Why text says what it found.</p>")
    parts.extend(_entry(i, dict(entry), record) for i, entry in enumerate(record.transcript))
    if record.script:
        parts.append(f"<p><b>Reproduce</b> (exit 1: the bug shows; 0: it does not; 2: cannot run; 3: a race not "
                     f"met): <code>sh {escape(record.script)}</code><br><b>Replay:</b> <code>{escape(record.replay)}"
                     "</code></p>")
    parts.extend(f"<p class='muted'>{escape(note)}</p>" for note in record.notes)
    parts.append("</div>")
    return "".join(parts)
