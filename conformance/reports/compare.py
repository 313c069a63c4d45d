"""Runs compared: requirement x run, each with its verdict, from several runs' ``results.json``.

A requirement's verdict in a run is the most severe verdict of its checks there (``Verdict.severity``).
It *holds* when every check of it passed (PASS or INFO) and *fails* when one departed (FAIL, WARN) or
could not conclude (UNTESTABLE, UNKNOWN, ERROR); SKIP, XFAIL and XPASS are neither (not scored, or
the baseline's business). A *new failure* is a requirement an earlier run held and a later one
fails: what ``compare --fail-on-new`` gates a pull request on.

The results files are data: each is read within a size bound and every field used is type-checked;
anything else is a ``ConfigError`` naming the file and what is wrong (one line).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from refkit.jsonvalue import loads
from conformance.errors import ConfigError
from conformance.verdicts import Verdict
from refkit.version import PROTOCOL_COMMIT, VERSION

__all__ = ["MAX_RESULTS_BYTES", "Comparison", "RunResults", "badge_svg", "compare", "load_results", "render_compare_html",
           "write_comparison"]

MAX_RESULTS_BYTES = 64 * 1024 * 1024  # a full run's results.json is a few MiB
_MAX_RECORDS = 100_000
_LEVELS = ("MUST", "SHOULD", "MAY")
_HOLDS = frozenset({Verdict.PASS, Verdict.INFO})
_FAILS = frozenset({Verdict.FAIL, Verdict.WARN, Verdict.UNTESTABLE, Verdict.UNKNOWN, Verdict.ERROR})


@dataclass(frozen=True, slots=True)
class Check:
    requirement: str
    level: str
    capability: str
    verdict: Verdict


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResults:
    """What a comparison reads of one run's ``results.json``."""

    label: str
    path: str
    profile: str
    target: str
    seed: object
    kit_version: str | None  # None: written by a kit before reports named it
    protocol_commit: str | None
    health: object
    checks: tuple[Check, ...]


def _text(value: object, where: str, *, limit: int = 1000) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise ConfigError(f"{where}: expected a string of at most {limit} characters")
    return value


def load_results(path: str, label: str) -> RunResults:
    """Read one run's ``results.json``.

    Raises:
        ConfigError: unreadable, too large, not JSON, or not shaped like a run's results (naming the field).
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_RESULTS_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    if len(raw) > MAX_RESULTS_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_RESULTS_BYTES // (1024 * 1024)} MiB, not a run's results.json")
    try:
        data = loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({str(exc).splitlines()[0] if str(exc) else 'too deeply nested'})") from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise ConfigError(f"{path}: not a run's results.json (no list of records)")
    records = data["records"]
    if len(records) > _MAX_RECORDS:
        raise ConfigError(f"{path}: more than {_MAX_RECORDS} records")
    checks = []
    for index, record in enumerate(records):
        where = f"{path}: records[{index}]"
        if not isinstance(record, dict):
            raise ConfigError(f"{where}: expected an object")
        verdict = record.get("verdict")
        if not isinstance(verdict, str) or verdict not in Verdict.__members__:
            raise ConfigError(f"{where}.verdict: expected one of {', '.join(Verdict)}, got {str(verdict)[:40]!r}")
        level = record.get("level")
        if not isinstance(level, str) or level not in _LEVELS:
            raise ConfigError(f"{where}.level: expected MUST, SHOULD or MAY, got {str(level)[:40]!r}")
        checks.append(Check(requirement=_text(record.get("requirement"), f"{where}.requirement", limit=100),
                            level=str(level), capability=_text(record.get("capability"), f"{where}.capability",
                                                               limit=100),
                            verdict=Verdict(verdict)))
    optional = {key: _text(data[key], f"{path}: {key}") if data.get(key) is not None else None
                for key in ("kit_version", "protocol_commit")}
    return RunResults(label=label, path=path, profile=_text(data.get("profile"), f"{path}: profile", limit=100),
                      target=_text(data.get("target", ""), f"{path}: target"), seed=data.get("seed"),
                      kit_version=optional["kit_version"], protocol_commit=optional["protocol_commit"],
                      health=data.get("health"), checks=tuple(checks))


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One requirement in one run (``verdict`` None: no check of it ran there)."""

    verdict: Verdict | None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.verdict is not None and all(Verdict(v) in _HOLDS for v in self.counts)

    @property
    def fails(self) -> bool:
        return any(Verdict(v) in _FAILS for v in self.counts)

    def to_json(self) -> dict[str, object]:
        return {"verdict": None if self.verdict is None else str(self.verdict), "counts": self.counts,
                "holds": self.holds, "fails": self.fails}


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    requirement: str
    level: str
    capability: str
    text: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    runs: tuple[RunResults, ...]
    rows: tuple[Row, ...]  # by capability, level, id
    new_failures: tuple[dict[str, str], ...]

    def musts(self, index: int) -> tuple[int, int]:
        """MUSTs held and MUSTs scored (some verdict other than SKIP) in run ``index``."""
        cells = [row.cells[index] for row in self.rows if row.level == "MUST"]
        scored = [c for c in cells if c.verdict is not None and c.verdict is not Verdict.SKIP]
        return sum(c.holds for c in scored), len(scored)

    def to_json(self) -> dict[str, object]:
        return {
            "kit_version": VERSION, "protocol_commit": PROTOCOL_COMMIT,
            "runs": [{"label": run.label, "results": run.path, "profile": run.profile, "target": run.target,
                      "seed": run.seed, "kit_version": run.kit_version, "protocol_commit": run.protocol_commit,
                      "health": run.health, "musts_held": self.musts(n)[0], "musts_scored": self.musts(n)[1]}
                     for n, run in enumerate(self.runs)],
            "requirements": [{"id": row.requirement, "level": row.level, "capability": row.capability,
                              "text": row.text, "runs": [cell.to_json() for cell in row.cells]} for row in self.rows],
            "new_failures": list(self.new_failures),
        }


def _cell(checks: list[Check]) -> Cell:
    if not checks:
        return Cell(verdict=None)
    counts = Counter(str(c.verdict) for c in checks)
    return Cell(verdict=max((c.verdict for c in checks), key=lambda v: v.severity), counts=dict(sorted(counts.items())))


def compare(runs: Sequence[RunResults], texts: dict[str, str] | None = None) -> Comparison:
    """Requirement x run, grouped by capability and level, and the new failures (earlier held, later fails).

    Raises:
        ConfigError: the runs are of different profiles.
    """
    profiles = sorted({run.profile for run in runs})
    if len(profiles) > 1:
        raise ConfigError(f"the runs are of different profiles ({', '.join(profiles)}): their requirements differ")
    first: dict[str, Check] = {}
    for run in runs:
        for check in run.checks:
            first.setdefault(check.requirement, check)
    order = sorted(first.values(), key=lambda c: (c.capability, _LEVELS.index(c.level), c.requirement))
    rows = []
    new_failures = []
    for known in order:
        cells = tuple(_cell([c for c in run.checks if c.requirement == known.requirement]) for run in runs)
        rows.append(Row(requirement=known.requirement, level=known.level, capability=known.capability,
                        text=(texts or {}).get(known.requirement, ""), cells=cells))
        for later, cell in enumerate(cells):
            held = next((n for n in range(later) if cells[n].holds), None)
            if cell.fails and held is not None:
                new_failures.append({"requirement": known.requirement, "level": known.level,
                                     "held_in": runs[held].label, "fails_in": runs[later].label,
                                     "verdict": str(cell.verdict)})
    return Comparison(runs=tuple(runs), rows=tuple(rows), new_failures=tuple(new_failures))


def badge_svg(label: str, held: int, scored: int) -> str:
    """A flat badge ``label | N/M MUSTs``: green when every scored MUST holds, red otherwise."""
    value = f"{held}/{scored} MUSTs"
    colour = "#4c1" if held == scored and scored else "#e05d44"
    # Widths from a 7 px average glyph of 11 px Verdana, as flat badges are usually drawn.
    left, right = 10 + 7 * len(label), 10 + 7 * len(value)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + right}" height="20" role="img" '
            f'aria-label="{escape(label)}: {value}"><title>{escape(label)}: {value}</title>'
            f'<rect width="{left}" height="20" fill="#555"/><rect x="{left}" width="{right}" height="20" '
            f'fill="{colour}"/><g fill="#fff" text-anchor="middle" font-family="Verdana,sans-serif" font-size="11">'
            f'<text x="{left / 2}" y="14">{escape(label)}</text><text x="{left + right / 2}" y="14">{value}</text>'
            "</g></svg>\n")


def render_compare_html(comparison: Comparison) -> str:
    """One page: per run its target, kit and health; then requirement x run, grouped by capability and level."""
    from conformance.reports.html_report import REPORT_CSS

    def verdict(cell: Cell) -> str:
        if cell.verdict is None:
            return "<td class='muted'>-</td>"
        shown = ", ".join(f"{v} {n}" for v, n in cell.counts.items())
        return f"<td><span class='v {escape(str(cell.verdict))}'>{escape(str(cell.verdict))}</span> " \
               f"<span class='muted'>{escape(shown)}</span></td>"

    runs = "".join(
        f"<tr><td>{escape(run.label)}</td><td>{escape(run.target)}</td><td>{escape(run.kit_version or '?')}</td>"
        f"<td>{escape(run.protocol_commit or '?')}</td><td><code>{escape(json.dumps(run.health, sort_keys=True))}"
        f"</code></td><td>{badge_svg(run.label, *comparison.musts(n))}</td></tr>"
        for n, run in enumerate(comparison.runs))
    new = {(f["requirement"], f["fails_in"]) for f in comparison.new_failures}
    body = []
    group = None
    for row in comparison.rows:
        if (row.capability, row.level) != group:
            group = (row.capability, row.level)
            body.append(f"<tr><th colspan='{len(comparison.runs) + 1}'>{escape(row.capability)} &middot; "
                        f"{escape(row.level)}</th></tr>")
        flag = " class='failed'" if any((row.requirement, run.label) in new for run in comparison.runs) else ""
        body.append(f"<tr><td{flag}><b>{escape(row.requirement)}</b> <span class='req'>{escape(row.text)}</span></td>"
                    + "".join(verdict(cell) for cell in row.cells) + "</tr>")
    listed = "".join(f"<li><b>{escape(f['requirement'])}</b> held in {escape(f['held_in'])}, "
                     f"{escape(f['verdict'])} in {escape(f['fails_in'])}</li>" for f in comparison.new_failures)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Conformance runs compared</title>"
            f"<style>{REPORT_CSS}</style></head><body><h1>Conformance runs compared</h1>"
            f"<p class='muted'>aidememo-conformance {escape(VERSION)} (AideMemo profiles follow upstream commit "
            f"<code>{escape(PROTOCOL_COMMIT)}</code>).</p>"
            "<table><tr><th>run</th><th>target</th><th>kit</th><th>protocol</th><th>/health</th><th>MUSTs</th></tr>"
            f"{runs}</table>"
            f"<h2>New failures</h2>{f'<ul>{listed}</ul>' if listed else '<p>None.</p>'}"
            "<h2>Requirements</h2><table><tr><th>requirement</th>"
            + "".join(f"<th>{escape(run.label)}</th>" for run in comparison.runs) + "</tr>"
            + "".join(body) + "</table></body></html>\n")


def write_comparison(comparison: Comparison, out_dir: Path) -> list[Path]:
    """``compare.json``, ``compare.html`` and one ``badge-LABEL.svg`` per run; the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "compare.json", out_dir / "compare.html"]
    _write(written[0], json.dumps(comparison.to_json(), indent=1, ensure_ascii=False) + "\n")
    _write(written[1], render_compare_html(comparison))
    for n, run in enumerate(comparison.runs):
        badge = out_dir / f"badge-{_file_label(run.label)}.svg"
        _write(badge, badge_svg(run.label, *comparison.musts(n)))
        written.append(badge)
    return written


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, never through a link planted there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _file_label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label)[:60] or "run"
