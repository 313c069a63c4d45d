"""Targets the diff tests need that are not broken variants (those are ``mutants.py``'s).

Loaded like the mutants, through ``--embedded-factory diff_targets:<name>`` with this directory
on PYTHONPATH, in the embedded target's own process.
"""

from __future__ import annotations

import json
import math
from typing import Any

import aidememo_ref
from refkit.response import Response

_UPSTREAM_500 = b'{"error":{"code":"storage_failure","message":"internal server error"}}'


def _lower_scores(body: bytes) -> bytes:
    """A search answer with every score one float step lower (order kept), as another correct
    summation order would give (wire §8 item 8: exact scores are implementation-defined)."""
    data = json.loads(body)
    for hit in data.get("results", []):
        for key in ("score", "lexical_score"):
            if isinstance(hit.get(key), float):
                hit[key] = math.nextafter(hit[key], -math.inf)
    return json.dumps(data, separators=(",", ":")).encode()


def upstream_answers(db_path: str) -> Any:
    """The reference answering as upstream does where the two may differ without either being wrong:
    a member's mailbox before_seq above 2^63-1 is upstream's 500 (ERRATA 4; everyone else still
    gets the 401 or 403 that comes first), and search scores differ in their last digit."""
    ledger = aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)
    original = ledger.service.handle

    def handle(method: str, target: Any, headers: Any, body: bytes = b"", **options: Any) -> Any:
        response = original(method, target, headers, body, **options)
        raw = target.encode("latin-1") if isinstance(target, str) else target
        path = raw.partition(b"?")[0]
        if method == "GET" and path.endswith(b"/handoffs") and b"before_seq must be at most" in response.body:
            return Response(500, (("content-type", "application/json"),), _UPSTREAM_500)
        if method == "GET" and path.endswith(b"/search") and response.status == 200:
            return Response(200, response.headers, _lower_scores(response.body))
        return response

    ledger.service.handle = handle
    return ledger


def content_changed(db_path: str) -> Any:
    """A wrong server: every search hit's content is answered in capitals (a field no rule leaves open)."""
    ledger = aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)
    original = ledger.service.handle

    def handle(method: str, target: Any, headers: Any, body: bytes = b"", **options: Any) -> Any:
        response = original(method, target, headers, body, **options)
        raw = target.encode("latin-1") if isinstance(target, str) else target
        if method == "GET" and raw.partition(b"?")[0].endswith(b"/search") and response.status == 200:
            data = json.loads(response.body)
            for hit in data.get("results", []):
                hit["content"] = str(hit.get("content", "")).upper()
            return Response(200, response.headers, json.dumps(data, separators=(",", ":")).encode())
        return response

    ledger.service.handle = handle
    return ledger
