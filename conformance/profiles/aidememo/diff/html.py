"""``diff.html``: the differential run as one self-contained page, in ``run``'s report style.

It renders what ``diff.json`` holds (header, the state coverage, tolerated departures, each
divergence with its shrunk steps, both answers side by side, the replay command and script), so
it carries no more than that file: steps name actors, never tokens. Every value is escaped.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from conformance.reports.html_report import REPORT_CSS, provenance_html

__all__ = ["render_diff_html"]


def _json(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1))


def _header(summary: dict[str, Any]) -> str:
    count = len(summary["divergences"])
    verdict = ("<span class='v PASS'>0 divergences</span>" if not count
               else f"<span class='v FAIL'>{count} divergence(s)</span>")
    routes = "".join(f"<tr><td>{escape(route)}</td><td>{n}</td></tr>" for route, n in summary["routes"].items())
    return (f"<h1>aidememo-conformance diff: {escape(str(summary.get('target', '')))}</h1>"
            f"<p>seed <code>{summary['seed']}</code>, {summary['steps']} steps in {summary['episodes']} episodes "
            f"({summary['seconds']} s), budget {escape(str(summary.get('budget_s', '')))} s or "
            f"{escape(str(summary.get('max_steps', '')))} steps, {len(summary['routes'])} routes reached"
            + (f"; the first divergence came after {summary['found_at_s']} s" if summary.get("found_at_s") else "")
            + ".</p>"
            f"<p><b>{verdict}</b></p>" + provenance_html(summary)
            + "".join(f"<p class='muted'>{escape(note)}</p>" for note in summary.get("notes", ()))
            + f"<details><summary>routes reached</summary><table><tr><th>route</th><th>steps</th></tr>{routes}"
              "</table></details>")


def _coverage(summary: dict[str, Any]) -> str:
    """The (route, status, error code, record state) pairs reached, by route; their growth; the aims tried."""
    coverage = summary.get("coverage") or {}
    reached = coverage.get("reached", [])
    by_route: dict[str, list[dict[str, Any]]] = {}
    for pair in reached:
        by_route.setdefault(pair["route"], []).append(pair)
    rows = "".join(
        f"<tr><td>{escape(route)}</td><td>{len(pairs)}</td><td>{len({p['state'] for p in pairs})}</td>"
        f"<td>{escape(', '.join(sorted({str(p['status']) + (' ' + p['code'] if p['code'] else '') for p in pairs})))}"
        "</td></tr>" for route, pairs in sorted(by_route.items()))
    pairs = "".join(f"<tr><td>{escape(p['route'])}</td><td>{p['status']}</td><td>{escape(p['code'])}</td>"
                    f"<td>{escape(p['state'])}</td><td>{p['count']}</td></tr>" for p in reached)
    timeline = coverage.get("timeline", [])
    shown = timeline[::max(1, len(timeline) // 20)] + timeline[-1:] if timeline else []
    growth = "".join(f"<tr><td>{seconds}</td><td>{steps}</td><td>{count}</td></tr>"
                     for seconds, steps, count in dict.fromkeys(map(tuple, shown)))
    aims = "".join(f"<tr><td>{escape(aim)}</td><td>{n}</td></tr>" for aim, n in coverage.get("aims", {}).items())
    return (f"<h2>State coverage</h2><p>{coverage.get('pairs', 0)} (route, status, error code, record state) pairs "
            f"reached, {coverage.get('route_states', 0)} (route, record state) pairs; {len(coverage.get('aims', {}))} "
            "aims tried. A record state is what the reference's earlier answers made of the record the step "
            "addresses (a handoff's status and what the step brings to it), or for reads of mailboxes and feeds the "
            "handoff statuses of the episode.</p>"
            "<table><tr><th>route</th><th>pairs</th><th>record states</th><th>answers</th></tr>"
            f"{rows}</table><details><summary>every pair reached</summary><table><tr><th>route</th><th>status</th>"
            f"<th>error code</th><th>record state</th><th>times</th></tr>{pairs}</table></details>"
            "<details><summary>pairs over time</summary><table><tr><th>seconds</th><th>steps</th><th>pairs</th></tr>"
            f"{growth}</table></details><details><summary>aims tried</summary><table><tr><th>aim</th><th>times</th>"
            f"</tr>{aims}</table></details>")


def _tolerated(summary: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{t['count']}</td><td>{escape(t['reason'])}</td></tr>" for t in summary["tolerated"])
    body = f"<table><tr><th>times</th><th>reason</th></tr>{rows}</table>" if rows else "<p>None.</p>"
    return f"<h2>Tolerated departures</h2>{body}"


def _step(number: int, step: dict[str, Any], last: bool) -> str:
    query = f"?{step['query']}" if step.get("query") else ""
    sent = {key: step[key] for key in ("body", "raw_body", "headers") if key in step}
    head = (f"{number}. {escape(step['actor'])} {escape(step['method'])} {escape(step['path'] + query)} "
            f"<span class='muted'>[{escape(step.get('note', ''))}]</span>")
    if last:
        head = f"<b class='failed'>&#9654; the target diverged here</b> {head}"
    return (f"<details{' open' if last else ''} class='step{' failed-step' if last else ''}'><summary>{head}"
            f"</summary>{f'<pre>{_json(sent)}</pre>' if sent else ''}</details>")


def _divergence(index: int, case: dict[str, Any]) -> str:
    steps = case["steps"]
    return "".join([
        f"<div class='case' id='divergence-{index}'><h3><span class='v FAIL'>DIVERGENCE {index}</span> "
        f"{escape(case['route'])}</h3>",
        f"<p>requirements: {escape(', '.join(case['requirements']) or '(none mapped)')}; "
        f"{'shrunk to' if case.get('shrunk', True) else 'the budget ended while shrinking:'} "
        f"{len(steps)} step(s) from {case['found_after_steps']}.</p>",
        "<table class='vs'><tr><th>first differing field</th><th>target</th><th>reference</th></tr>"
        f"<tr class='failed-step'><td class='failed'>{escape(case['field'])}</td>"
        f"<td>{_json(case['target_value'])}</td><td>{_json(case['reference_value'])}</td></tr>"
        f"<tr><td>status</td><td>HTTP {case['target']['status']}</td><td>HTTP {case['reference']['status']}</td></tr>"
        "</table>",
        "<table class='vs'><tr><th>target answered</th><th>reference answered</th></tr>"
        f"<tr><td><pre>{_json(case['target'])}</pre></td><td><pre>{_json(case['reference'])}</pre></td></tr></table>",
        f"<p><b>Shrunk steps</b> ({len(steps)}, in order):</p>",
        *(_step(number, step, number == len(steps)) for number, step in enumerate(steps, 1)),
        f"<p><b>Replay:</b> <code>{escape(case['replay'])}</code><br>"
        f"<b>Replay script (no kit needed):</b> <code>sh {escape(case['script'])}</code><br>"
        + (f"<b>Reproduce</b> (exit 1 while it diverges, 0 once it does not): <code>aidememo-conformance reproduce "
           f"{escape(case['reproduction'])}</code><br>" if case.get("reproduction") else "") +
        f"<b>Case file:</b> <code>{escape(case['case'])}</code></p></div>"])


def render_diff_html(summary: dict[str, Any]) -> str:
    """The page for ``summary``, the dict ``diff.json`` holds."""
    cases = summary["divergences"]
    return "".join([
        "<!doctype html><html><head><meta charset='utf-8'><title>aidememo-conformance diff report</title>",
        f"<style>{REPORT_CSS}</style></head><body>", _header(summary), _coverage(summary), _tolerated(summary),
        "<h2>Divergences</h2>", "" if cases else "<p>0 divergences: every answer matched the reference's.</p>",
        *(_divergence(index, case) for index, case in enumerate(cases, 1)), "</body></html>\n"])
