"""One self-contained HTML file per history: a lane per actor on a time axis, operations as bars.

The violating operations are drawn in red and the checker's explanation is printed under the
picture; above it, when the caller gives them, one sentence of what went wrong and the commands
that reproduce it. Everything (CSS, SVG) is inline, so the file can be attached to an issue as it is.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.errors import SimulationError
from simulations.linearizability.history import Operation

__all__ = ["render_timeline", "write_timeline"]

_LANE_PX = 34
_WIDTH_PX = 1100
_LEFT_PX = 110


def _label(op_input: Mapping[str, object], output: Mapping[str, object] | None) -> str:
    got = "unknown" if output is None else json.dumps(dict(output), sort_keys=True)
    return f"{json.dumps(dict(op_input), sort_keys=True)} -> {got}"


def render_timeline(
    history: Sequence[Operation],
    *,
    title: str,
    highlight: Collection[int] = (),
    explanation: str = "",
    actor_names: Mapping[int, str] | None = None,
    describe: Callable[[Mapping[str, object], Mapping[str, object] | None], str] = _label,
    summary: str = "",
    commands: Sequence[tuple[str, str]] = (),
) -> str:
    """The HTML text of the timeline (see the module docstring); ``summary``: one sentence of what
    went wrong, shown first; ``commands``: (what it does, command line) pairs that reproduce it."""
    clients = sorted({op.client for op in history})
    lane = {c: k for k, c in enumerate(clients)}
    start = min((op.call_ns for op in history), default=0)
    end = max([op.return_ns or op.call_ns for op in history] + [start + 1])
    # Unknown operations are drawn open to the right, a little past the last answer.
    open_end = end + (end - start) // 20 + 1
    names = {c: (actor_names or {}).get(c, f"client {c}") for c in clients}
    # Lanes start after the longest name (about 8 px per character at the label's font size).
    left = max(_LEFT_PX, 12 + 8 * max((len(n) for n in names.values()), default=0))
    scale = (_WIDTH_PX - left - 20) / (open_end - start)
    marked = set(highlight)
    shapes: list[str] = []
    for k, c in enumerate(clients):
        y = 20 + k * _LANE_PX
        shapes.append(f'<text x="4" y="{y + 18}" class="lane">{html.escape(names[c])}</text>')
        shapes.append(f'<line x1="{left}" x2="{_WIDTH_PX}" y1="{y + 26}" y2="{y + 26}" class="axis"/>')
    for i, op in enumerate(history):
        x1 = left + (op.call_ns - start) * scale
        x2 = left + ((op.return_ns if op.return_ns is not None else open_end) - start) * scale
        y = 22 + lane[op.client] * _LANE_PX
        cls = "bad" if i in marked else ("open" if op.unknown else "op")
        tip = html.escape(f"#{i} client {op.client}: {describe(op.input, op.output)}")
        shapes.append(
            f'<rect x="{x1:.1f}" y="{y}" width="{max(x2 - x1, 2):.1f}" height="20" class="{cls}">'
            f"<title>{tip}</title></rect>"
        )
        if x2 - x1 > 40:
            kind = html.escape(str(op.input.get("op", "")))[:14]
            shapes.append(f'<text x="{x1 + 3:.1f}" y="{y + 14}" class="tag">#{i} {kind}</text>')
    height = 40 + len(clients) * _LANE_PX
    rows = "\n".join(
        f"<tr class=\"{'bad' if i in marked else ''}\"><td>#{i}</td><td>{op.client}</td>"
        f"<td>{op.call_ns - start}</td><td>{'' if op.return_ns is None else op.return_ns - start}</td>"
        f"<td>{html.escape(describe(op.input, op.output))}</td></tr>"
        for i, op in enumerate(history)
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font: 13px system-ui, sans-serif; margin: 16px; }}
.lane {{ font-weight: 600; }} .axis {{ stroke: #ccc; }}
.op {{ fill: #8fb3e0; stroke: #345; }} .open {{ fill: #eee; stroke: #888; stroke-dasharray: 4 2; }}
.bad {{ fill: #e34b4b; stroke: #700; }} .tag {{ font-size: 10px; pointer-events: none; }}
tr.bad td {{ background: #fdd; }} td {{ padding: 1px 8px; font-family: monospace; }}
pre {{ background: #f6f6f6; padding: 8px; white-space: pre-wrap; }}
.summary {{ font-size: 15px; font-weight: 600; }} code {{ background: #f6f6f6; padding: 1px 4px; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{f'<p class="summary">{html.escape(summary)}</p>' if summary else ''}
{_commands(commands)}
<p>{len(history)} operations, {len(clients)} lanes; time in ns from the first call. Red: the
operations to blame; dashed: no answer (unknown). Hover a bar for its request and result.</p>
<svg width="{_WIDTH_PX}" height="{height}" xmlns="http://www.w3.org/2000/svg">
{chr(10).join(shapes)}
</svg>
<h2>Explanation</h2>
<pre>{html.escape(explanation)}</pre>
<h2>Operations</h2>
<table><tr><th>op</th><th>client</th><th>call</th><th>return</th><th>request and result</th></tr>
{rows}
</table></body></html>
"""


def _commands(commands: Sequence[tuple[str, str]]) -> str:
    if not commands:
        return ""
    rows = "".join(f"<li>{html.escape(what)}: <code>{html.escape(line)}</code></li>" for what, line in commands)
    return f"<h2>Reproduce</h2><ul>{rows}</ul>"


def write_timeline(path: Path, history: Sequence[Operation], **kwargs: Any) -> None:
    """Write :func:`render_timeline` to ``path``.

    Raises:
        SimulationError: when the file cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        from refkit.files import write_atomic  # here: the model, which imports this module, loads no refkit

        write_atomic(path, render_timeline(history, **kwargs))
    except OSError as exc:
        raise SimulationError(f"cannot write timeline {path}: {exc.strerror}") from exc
