"""A fault campaign's reports: ``faults.json`` (the schedule, the windows, the counts, the
findings), ``timeline.html`` (every request by kind over time, the fault windows marked: one
self-contained file) and, with matplotlib (the ``faults`` extra), ``latency.png`` and
``throughput.png`` per operation kind with the fault windows shaded."""

from __future__ import annotations

import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refkit.files import write_atomic
from simulations.errors import SimulationError
from simulations.faults.nemesis import Call, Window
from simulations.faults.run import FaultRun

__all__ = ["PLOTS_MISSING", "write_reports"]

PLOTS_MISSING = "plots skipped:"  # then the extras' own line (refkit.extras) naming the pip command
_MAX_DRAWN = 20_000  # requests drawn on the timeline; beyond, every n-th
_COLOURS = {"kill": "#d62728", "pause": "#ff7f0e", "drop-answers": "#9467bd", "reset": "#8c564b",
            "clock-jump": "#1f77b4"}


def write_reports(run: FaultRun, out: Path, *, command: str) -> tuple[dict[str, Path], str | None]:
    """The report files under ``out`` by label, and the line to print when the plots were skipped.

    Raises:
        SimulationError: ``out`` cannot be written.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = {"fault report": out / "faults.json", "timeline": out / "timeline.html"}
        write_atomic(paths["fault report"], json.dumps(_document(run, command), indent=2) + "\n")
        write_atomic(paths["timeline"], _timeline(run, command))
        skipped = _plots(run, out, paths)
    except OSError as exc:
        raise SimulationError(f"cannot write the fault reports to {out}: {exc.strerror or exc}") from None
    return paths, skipped


def _document(run: FaultRun, command: str) -> dict[str, object]:
    nemesis = run.nemesis
    batches = run.result.batches
    return {
        "seed": nemesis.schedule.seed, "kinds": list(nemesis.schedule.kinds), "replay": command,
        "summary": run.summary(), "verdict": run.verdict.value,
        "injected": {"kills": nemesis.kills, "pauses": nemesis.pauses, "answers_dropped": nemesis.dropped,
                     "resets": nemesis.resets, "clock_jumps": nemesis.jumps},
        "operations": {"answered": run.answered, "failed": run.failed, "indeterminate": run.indeterminate},
        "recovery_s": [round(r, 4) for r in nemesis.recoveries],
        "schedule": [f.to_json() for f in nemesis.schedule.upto(batches)],
        "windows": [{"kind": w.kind, "start_s": round(w.start_s, 4), "end_s": round(w.end_s, 4), "batch": w.batch}
                    for w in nemesis.windows],
        "findings": [{"rule": f.rule, "requirements": list(f.requirements), "explanation": f.explanation,
                      "replay": command} for f in run.findings],
    }


def _timeline(run: FaultRun, command: str) -> str:
    calls = run.nemesis.target.calls
    step = max(1, len(calls) // _MAX_DRAWN)
    drawn = calls[::step]
    kinds = sorted({c.kind for c in calls})
    end = max([c.end_s for c in calls] + [w.end_s for w in run.nemesis.windows] + [1.0])
    width, lane, left = 1100, 18, 150
    height = lane * (len(kinds) + 2)

    def x(t: float) -> float:
        return left + (width - left - 10) * t / end

    shapes = [_window(w, x, height) for w in run.nemesis.windows]
    for c in drawn:
        y = lane * (kinds.index(c.kind) + 1) + lane / 2
        colour = "#2ca02c" if c.outcome == "200" else "#d62728" if c.outcome == "lost" else "#bcbd22"
        shapes.append(f'<line x1="{x(c.start_s):.1f}" x2="{max(x(c.end_s), x(c.start_s) + 1):.1f}" y1="{y:.0f}" '
                      f'y2="{y:.0f}" stroke="{colour}" stroke-width="6"><title>{html.escape(c.kind)} '
                      f'{c.outcome} {c.start_s:.3f}-{c.end_s:.3f} s</title></line>')
    labels = [f'<text x="4" y="{lane * (i + 1) + lane / 2 + 4:.0f}" font-size="11">{html.escape(k)}</text>'
              for i, k in enumerate(kinds)]
    findings = "".join(f"<li><b>{html.escape(f.rule)}</b> ({', '.join(f.requirements)}): "
                       f"<pre>{html.escape(f.explanation)}</pre></li>" for f in run.findings) or "<li>none</li>"
    faults = "".join(f"<li>{html.escape(f.describe())}</li>" for f in run.nemesis.schedule.upto(run.result.batches))
    legend = " ".join(f'<span style="background:{c};color:white;padding:0 4px">{k}</span>' for k, c in _COLOURS.items())
    return (f"<!doctype html><meta charset=utf-8><title>fault campaign, seed {run.nemesis.schedule.seed}</title>"
            f"<body style='font-family:sans-serif'><h1>Fault campaign, seed {run.nemesis.schedule.seed}</h1>"
            f"<p>{html.escape(run.summary())}</p><p>replay: <code>{html.escape(command)}</code></p>"
            f"<p>requests by kind over {end:.1f} s (green: answered 200, olive: another answer, red: lost); "
            f"fault windows: {legend}</p>"
            f"<svg width='{width}' height='{height}' style='border:1px solid #ccc'>{''.join(labels)}"
            f"{''.join(shapes)}</svg><h2>Findings</h2><ul>{findings}</ul><h2>Faults</h2><ul>{faults}</ul></body>")


def _window(w: Window, x: object, height: int) -> str:
    assert callable(x)
    start, end = x(w.start_s), max(x(w.end_s), x(w.start_s) + 2)
    return (f'<rect x="{start:.1f}" y="0" width="{end - start:.1f}" height="{height}" fill="{_COLOURS[w.kind]}" '
            f'opacity="0.25"><title>{w.kind}, batch {w.batch}: {w.start_s:.3f}-{w.end_s:.3f} s</title></rect>')


def _plots(run: FaultRun, out: Path, paths: dict[str, Path]) -> str | None:
    from refkit.extras import MissingExtra, require

    try:
        require("faults", "the fault campaign's plots")
    except MissingExtra as exc:
        return f"{PLOTS_MISSING} {exc}"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    calls, windows = run.nemesis.target.calls, run.nemesis.windows
    kinds = sorted({c.kind for c in calls})
    for name, draw in (("latency", _latency), ("throughput", _throughput)):
        figure, axes = plt.subplots(figsize=(11, 5))
        for w in windows:
            axes.axvspan(w.start_s, max(w.end_s, w.start_s + 0.01), color=_COLOURS[w.kind], alpha=0.2)
        draw(axes, calls, kinds)
        axes.set_xlabel("seconds since the start")
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        shaded = ", ".join(sorted({w.kind for w in windows})) or "no faults"
        axes.set_title(f"{name}, seed {run.nemesis.schedule.seed} (shaded: {shaded})")
        path = out / f"{name}.png"
        drawn = io.BytesIO()
        figure.savefig(drawn, format="png", dpi=100, bbox_inches="tight")
        write_atomic(path, drawn.getvalue())
        plt.close(figure)
        paths[name] = path
    return None


def _latency(axes: Any, calls: Sequence[Call], kinds: Sequence[str]) -> None:
    for kind in kinds:
        mine = [c for c in calls if c.kind == kind]
        axes.scatter([c.start_s for c in mine], [(c.end_s - c.start_s) * 1000 for c in mine], s=3,
                     label=kind)
    axes.set_ylabel("latency (ms)")
    axes.set_yscale("log")


def _throughput(axes: Any, calls: Sequence[Call], kinds: Sequence[str]) -> None:
    end = int(max((c.end_s for c in calls), default=0)) + 1
    for kind in kinds:
        buckets = [0] * end
        for c in calls:
            if c.kind == kind and c.outcome == "200":
                buckets[int(c.end_s)] += 1
        axes.plot(range(end), buckets, label=kind)
    axes.set_ylabel("answered per second")
