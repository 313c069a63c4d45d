"""What a history of concurrent XMemo captures and recalls must satisfy: three checks, no I/O.

Theory of operation. XMemo has no revisions to linearize; what concurrency can break is smaller
and is checked directly on the recorded history:

* **one memory per key** (XM-IDEM-1, XM-CAP-2): every answered capture sent with one
  idempotency key, or with one semantic key and the same content, names the same memory id,
  and the census read at the end finds at most one memory under that key's private path;
* **appends stay apart** (XM-CAP-4): two answered timeline events sent without a key are two
  memories;
* **recall within its bounds** (XM-RECALL-1, XM-RECALL-2): no answered recall has more items
  than its ``max_items``, nor a ``context_text`` whose estimate exceeds ``max_tokens``.

An operation whose answer never came (``output is None``) proves nothing either way and is
skipped, except that its key still counts at the census: an unknown capture may have written,
but never twice.

The token estimate is restated here from the kit's documentation rather than imported from the
reference, so a bug there cannot hide itself here. This module never imports ``aidememo_ref``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from simulations.linearizability.history import Operation

__all__ = ["Finding", "estimate_tokens", "violations", "describe_operation", "BYTES_PER_TOKEN"]

BYTES_PER_TOKEN: Final = 4  # docs/xmemo.md: ceil(utf8_bytes(context_text) / 4)


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A violation: the operations that show it (history indexes) and why, with the requirement id."""

    kind: str  # "idempotency" | "append" | "bounds"
    requirement: str
    witness: tuple[int, ...]
    explanation: str


def _answered(op: Operation) -> Mapping[str, object] | None:
    out = op.output
    return out if out is not None and out.get("http") == 200 else None


def _line(history: Sequence[Operation], i: int) -> str:
    op = history[i]
    return f"  #{i} (worker {op.client}): {describe_operation(op.input, op.output)}"


def _idempotency(history: Sequence[Operation]) -> list[Finding]:
    by_key: dict[str, list[int]] = {}
    census: dict[str, int] = {}
    for i, op in enumerate(history):
        key = op.input.get("key")
        if not isinstance(key, str):
            continue
        if op.input.get("op") == "capture":
            by_key.setdefault(key, []).append(i)
        elif op.input.get("op") == "census":
            census[key] = i
    found = []
    for key, indexes in by_key.items():
        ids = {str(out.get("id")): i for i in indexes if (out := _answered(history[i])) is not None}
        if len(ids) > 1:
            found.append(Finding(
                kind="idempotency", requirement="XM-IDEM-1",
                witness=tuple(sorted(ids.values())),
                explanation=f"captures with key {key} were answered with {len(ids)} different memory ids:\n"
                            + "\n".join(_line(history, i) for i in sorted(ids.values()))))
            continue
        where = census.get(key)
        if where is None or (out := _answered(history[where])) is None:
            continue
        count = out.get("count")
        if isinstance(count, int) and count > 1:
            witness = tuple(sorted([*indexes, where]))
            found.append(Finding(
                kind="idempotency", requirement="XM-IDEM-1", witness=witness,
                explanation=f"key {key} yielded {count} memories (census #{where}):\n"
                            + "\n".join(_line(history, i) for i in witness)))
    return found


def _appends(history: Sequence[Operation]) -> list[Finding]:
    first: dict[str, int] = {}
    for i, op in enumerate(history):
        if op.input.get("op") != "capture" or op.input.get("route") != "timeline_event" or op.input.get("key"):
            continue
        out = _answered(op)
        if out is None:
            continue
        memory_id = str(out.get("id"))
        if memory_id in first:
            j = first[memory_id]
            return [Finding(kind="append", requirement="XM-CAP-4", witness=(j, i),
                            explanation=f"two appended events were answered with one memory {memory_id}:\n"
                                        + _line(history, j) + "\n" + _line(history, i))]
        first[memory_id] = i
    return []


def _bounds(history: Sequence[Operation]) -> list[Finding]:
    found = []
    for i, op in enumerate(history):
        if op.input.get("op") != "recall" or (out := _answered(op)) is None:
            continue
        items, tokens = out.get("items"), out.get("tokens")
        max_items, max_tokens = op.input.get("max_items"), op.input.get("max_tokens")
        if isinstance(items, int) and isinstance(max_items, int) and items > max_items:
            found.append(Finding(kind="bounds", requirement="XM-RECALL-1", witness=(i,),
                                 explanation=f"a recall answered {items} items for max_items {max_items}:\n"
                                             + _line(history, i)))
        elif isinstance(tokens, int) and isinstance(max_tokens, int) and tokens > max_tokens:
            found.append(Finding(kind="bounds", requirement="XM-RECALL-2", witness=(i,),
                                 explanation=f"a recall's context_text is {tokens} estimated tokens for max_tokens "
                                             f"{max_tokens}:\n" + _line(history, i)))
    return found


def violations(history: Sequence[Operation]) -> list[Finding]:
    """Every violation of the three checks, most specific first (see the module docstring)."""
    return [*_idempotency(history), *_appends(history), *_bounds(history)]


def describe_operation(op_input: Mapping[str, object], output: Mapping[str, object] | None) -> str:
    """One line per operation, for explanations and the timeline."""
    kind = op_input.get("op")
    if kind == "capture":
        what = f"{op_input.get('actor')} {op_input.get('route')}"
        if op_input.get("key"):
            what += f" key={op_input.get('key')}"
    elif kind == "recall":
        what = f"{op_input.get('actor')} recall max_items={op_input.get('max_items')} max_tokens={op_input.get('max_tokens')}"
    else:
        what = f"census key={op_input.get('key')}"
    if output is None:
        return f"{what} -> unknown"
    shown = {k: v for k, v in output.items() if k in ("http", "id", "write", "replayed", "items", "tokens", "count")}
    return f"{what} -> {json.dumps(shown, sort_keys=True)}"
