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

__all__ = ["render_html"]

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
"""

_JS = """
function only(status){document.querySelectorAll('#reqs tbody tr').forEach(function(r){
r.style.display=(!status||r.dataset.status===status)?'':'none';});}
"""


def _verdict(v: str | None) -> str:
    return f'<span class="v {escape(v or "")}">{escape(v or "-")}</span>'


def _exchange(number: int, exchange: dict[str, Any]) -> str:
    request = "\n".join(f"{k}: {v}" for k, v in exchange["request_headers"])
    response = "\n".join(f"{k}: {v}" for k, v in exchange["response_headers"])
    status = exchange["status"] or f"no answer ({exchange['error']})"
    return (
        f"<details{' open' if number < 12 else ''}><summary>#{number + 1} {escape(exchange['method'])} "
        f"{escape(exchange['url'])} &rarr; {escape(str(status))}</summary>"
        f"<pre>{escape(exchange['method'])} {escape(exchange['url'])}\n{escape(request)}\n\n"
        f"{escape(exchange['request_body'])}</pre>"
        f"<pre>HTTP {escape(str(status))}\n{escape(response)}\n\n{escape(exchange['response_body'])}</pre></details>"
    )


def render_html(summary: dict[str, Any], rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> str:
    """Render the report; every value from the target is escaped."""
    texts = {row["id"]: row for row in rows}
    grid: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in records:
        grid[(record["capability"], record["level"])][record["verdict"]] += 1
    capabilities = sorted({cap for cap, _ in grid})
    levels = ("MUST", "SHOULD", "MAY")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>AideMemo conformance report</title>",
        f"<style>{_CSS}</style><script>{_JS}</script></head><body>",
        f"<h1>AideMemo conformance: {escape(summary['target'])}</h1>",
        f"<p>profile <b>{escape(summary['profile'])}</b>, mode {escape(summary['mode'])}, seed "
        f"<code>{summary['seed']}</code>, run tag <code>{escape(summary['run_tag'])}</code>, "
        f"{summary['requests']} requests, {escape(summary['kit'])}.</p>",
        f"<p><b>{'Every scored MUST holds.' if summary['ok'] else 'A scored MUST does not hold.'}</b></p>",
        "<p>" + " ".join(f"{_verdict(v)} {n}" for v, n in summary["counts"].items() if n) + "</p>",
        # What to act on comes first: one line per failure or warning, linking to its case below.
        "".join(
            ["<h2>To act on</h2><ul>"]
            + [f"<li><a href='#{escape(r['nodeid'])}'>{_verdict(r['verdict'])} {escape(r['requirement'])}</a> "
               f"{escape(r['nodeid'].rsplit('::', 1)[-1])}</li>" for r in summary["failures"]]
            + ["</ul>"]
        ) if summary["failures"] else "",
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
                            for s in ("tested", "not scored", "untested", "excluded"))
                 + "</p><table id='reqs'><thead><tr><th>id</th><th>level</th><th>capability</th><th>status</th>"
                 "<th>verdict</th><th>requirement</th></tr></thead><tbody>")
    for row in rows:
        parts.append(
            f"<tr data-status='{escape(row['status'])}'><td>{escape(row['id'])}</td><td>{row['level']}</td>"
            f"<td>{escape(row['capability'])}</td><td>{escape(row['status'])}</td><td>{_verdict(row['verdict'])}</td>"
            f"<td>{escape(row['text'])}<div class='muted'>{escape(row['source'])} &middot; "
            f"{len(row['checks'])} check(s)</div></td></tr>")
    parts.append("</tbody></table><h2>Failures and warnings</h2>")
    cases = summary["failures"]
    if not cases:
        parts.append("<p>None.</p>")
    for record in cases:
        row = texts.get(record["requirement"], {})
        parts.append(
            f"<div class='case' id='{escape(record['nodeid'])}'><h3>{_verdict(record['verdict'])} "
            f"{escape(record['requirement'])} ({record['level']}) &mdash; "
            f"{escape(record['nodeid'].rsplit('::', 1)[-1])}</h3>"
            f"<p class='req'>{escape(row.get('text', ''))}</p>"
            f"<p><b>Why:</b></p><pre>{escape(record['reason'])}</pre>"
            f"<p><b>pytest node id:</b> <code>{escape(record['nodeid'])}</code><br>"
            f"<b>Rerun:</b> <code>{escape(record['rerun'])}</code></p>")
        transcript = record.get("transcript", [])
        parts.append(f"<p><b>Transcript</b> ({len(transcript)} exchanges, tokens redacted):</p>")
        parts.extend(_exchange(i, exchange) for i, exchange in enumerate(transcript))
        if record.get("curl"):
            parts.append(f"<details><summary>curl reproduction</summary><pre>{escape(record['curl'])}</pre></details>")
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "".join(parts)
