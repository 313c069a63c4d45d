"""A run's Markdown summary (what a pull request shows) and its CI outputs, from its ``results.json``.

``render_markdown`` writes the result, the verdict counts, each failing or warning requirement with
its sentence, reason and rerun command, the XFAILs, the stale baseline entries and the report
files; ``outputs`` are the ``name=value`` pairs GitHub's ``GITHUB_OUTPUT`` takes (the result and one
count per verdict). Everything from the target is escaped, and the page is bounded (GitHub keeps
at most 1 MiB of a step's summary).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from conformance.verdicts import Verdict

__all__ = ["outputs", "render_markdown"]

_SHOWN = 50  # failures and warnings listed; the rest are in the report
_REASON_CHARS = 800
_DEPARTS = (Verdict.FAIL, Verdict.ERROR, Verdict.XPASS, Verdict.UNTESTABLE, Verdict.UNKNOWN, Verdict.WARN, Verdict.INFO)
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # what changes inline text (a value never starts a line)


def _text(value: object, limit: int = _REASON_CHARS) -> str:
    """Plain text in Markdown: HTML and Markdown syntax escaped, one line, cut at ``limit``."""
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[:limit] + " [cut; the whole reason is in the report]"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", text)


def _code(command: str) -> str:
    """A command as inline code, fenced by more backticks than it holds in a row."""
    line = " ".join(command.split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    return f"{fence} {line} {fence}"


def outputs(results: Mapping[str, Any], code: int) -> dict[str, str]:
    """The step's outputs: ``result`` (pass, fail or error) and one lower-case count per verdict."""
    counts = results.get("counts", {}) if isinstance(results.get("counts"), dict) else {}
    found = {"result": "pass" if code == 0 else "fail" if code == 1 else "error"}
    for verdict in Verdict:
        number = counts.get(str(verdict), 0)
        found[str(verdict).lower()] = str(number if isinstance(number, int) else 0)
    return found


def render_markdown(results: Mapping[str, Any], sentences: Mapping[str, str], code: int,
                    report_files: list[str]) -> str:
    """The summary of one run (``results`` as its ``results.json`` holds it; ``sentences`` by requirement id)."""
    listed = results.get("records")
    records = [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
    verdict_of = {str(v): v for v in Verdict}
    mark = "✅" if code == 0 else "❌"
    counts = outputs(results, code)
    lines = [
        f"## {mark} {_text(results.get('title', 'Protocol'))} conformance against {_text(results.get('target', '?'))}",
        "",
        f"**RESULT: {_text(results.get('result', 'no result'))}**",
        "",
        f"profile {_text(results.get('profile', '?'))}, seed {_text(results.get('seed', '?'))}, "
        f"{_text(results.get('kit', 'aidememo-conformance'))}"
        + (f", protocol at upstream commit {_text(results['protocol_commit'])}" if results.get("protocol_commit") else "")
        + "; the target's /health answered "
        f"{_code(json.dumps(results.get('health'), sort_keys=True)[:_REASON_CHARS])}",
        "",
        "| " + " | ".join(str(v) for v in Verdict) + " |",
        "|" + "---|" * len(Verdict),
        "| " + " | ".join(counts[str(v).lower()] for v in Verdict) + " |",
        "",
    ]
    departing = sorted((r for r in records if verdict_of.get(str(r.get("verdict"))) in _DEPARTS),
                       key=lambda r: (-verdict_of[str(r["verdict"])].severity, str(r.get("requirement"))))
    if departing:
        lines += ["### Failing and warning requirements", ""]
        by_requirement: dict[str, list[dict[str, Any]]] = {}
        for record in departing[:_SHOWN]:
            by_requirement.setdefault(str(record.get("requirement", "")), []).append(record)
        for requirement, mine in by_requirement.items():
            lines.append(f"- **{_text(mine[0]['verdict'])} {_text(requirement)}**: {_text(sentences.get(requirement, ''))}")
            for check in mine:
                lines.append(f"  - {_text(check['verdict'])} {_code(str(check.get('nodeid', '')))}: "
                             f"{_text(check.get('reason', '')) or 'no reason given'}")
                if check.get("rerun"):
                    lines.append(f"    rerun: {_code(str(check['rerun']))}")
        if len(departing) > _SHOWN:
            lines.append(f"- ... and {len(departing) - _SHOWN} more checks (see the report)")
        lines.append("")
    expected = [r for r in records if r.get("verdict") == str(Verdict.XFAIL)]
    if expected:
        lines += ["### Expected failures (XFAIL, excused by the baseline)", ""]
        lines += [f"- {_text(r.get('requirement', ''))} {_code(str(r.get('nodeid', '')))}: "
                  f"{_text(r.get('baseline') or r.get('reason', ''))}" for r in expected[:_SHOWN]]
        lines.append("")
    stale = [str(entry) for entry in results.get("stale_baseline") or [] if isinstance(entry, str)]
    if stale:
        lines += ["### Stale baseline entries (their checks pass now: remove them)", ""]
        lines += [f"- {_text(entry)}" for entry in stale[:_SHOWN]]
        lines.append("")
    if report_files:
        lines += ["### Reports", "", ", ".join(_code(path) for path in report_files), ""]
    return "\n".join(lines) + "\n"
