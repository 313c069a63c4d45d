"""Running an XMemo batch: each request sent as its worker's agent, its answer read and recorded.

The workers, the scheduler and the retry are the AideMemo simulator's own (``execution.run_lanes``,
``execution.settle``); only sending and reading XMemo's answers live here. A capture with a key
whose answer was lost (transport error, 5xx) is sent once more, identically, which the key makes
safe; recalls are never retried.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from refkit.jsonvalue import loads
from simulations.execution import run_lanes, settle
from simulations.linearizability.history import Recorder
from simulations.plan import Batch, PlannedOp
from simulations.targets import Lost
from simulations.xmemo.model import estimate_tokens
from simulations.xmemo.targets import Target

__all__ = ["execute_batch"]


def _send(client: httpx.Client, op: PlannedOp) -> httpx.Response:
    if op.body is None:
        return client.request(op.method, op.path)
    body, headers = dict(op.body), {"content-type": "application/json"}
    key, via = op.input.get("key"), op.input.get("via")
    if isinstance(key, str) and via != "none":
        if via in ("body", "all"):
            body["idempotency_key"] = key
        for header in ("Idempotency-Key", "X-Idempotency-Key"):
            if via in (header, "all"):
                headers[header] = key
    return client.request(op.method, op.path, content=json.dumps(body).encode(), headers=headers)


def _output(response: httpx.Response, op: PlannedOp) -> dict[str, Any]:
    try:
        doc = loads(response.content)
    except ValueError:  # not JSON, or nested too deep
        doc = None
    out: dict[str, Any] = {"http": response.status_code}
    if response.status_code != 200 or not isinstance(doc, dict):
        out["detail"] = doc.get("detail") if isinstance(doc, dict) else response.text[:200]
        return out
    kind = op.input.get("op")
    if kind == "capture":
        out |= {"id": doc.get("id") or doc.get("memory_id"), "write": doc.get("write"),
                "replayed": response.headers.get("idempotent-replayed") == "true"}
    elif kind == "recall":
        items = doc["items"] if isinstance(doc.get("items"), list) else []
        out |= {"items": len(items), "tokens": estimate_tokens(str(doc.get("context_text") or "")),
                "ids": [str(i.get("id")) for i in items if isinstance(i, dict)]}
    else:
        results = doc["results"] if isinstance(doc.get("results"), list) else []
        out |= {"count": len(results), "ids": [str(r.get("id")) for r in results if isinstance(r, dict)]}
    return out


def _perform(target: Target, op: PlannedOp, recorder: Recorder, worker: int) -> None:
    client = target.client(str(op.input["actor"]))
    ticket = recorder.invoke(worker, dict(op.input))

    def send() -> httpx.Response:
        try:
            return _send(client, op)
        except httpx.ConnectError as exc:
            raise Lost(str(exc), delivered=False) from exc  # refused before anything was sent
        except httpx.HTTPError as exc:
            raise Lost(str(exc)) from exc

    # Only a capture with a key is safe to send again: the key makes the copy a replay.
    settle(recorder, ticket, send, status=lambda response: response.status_code,
           output=lambda response: _output(response, op),
           retry=op.input.get("op") == "capture" and op.input.get("key") is not None)


def execute_batch(target: Target, batch: Batch, recorder: Recorder, seed: int, script: Sequence[int] = ()) -> list[int]:
    """Launch ``batch`` at once, one thread per busy worker; returns the scheduler's decisions.

    Raises:
        SimulationError: when a worker stalls or fails outside the request it was sending.
    """
    return run_lanes(batch, lambda op, worker: _perform(target, op, recorder, worker), target.scheduler, seed, script)
