"""Targets the diff tests need that are not broken variants (those are ``mutants.py``'s).

Loaded like the mutants, through ``--embedded-factory diff_targets:<name>`` with this directory
on PYTHONPATH, in the embedded target's own process.
"""

from __future__ import annotations

from typing import Any

import aidememo_ref
from refkit.response import Response

_ABOVE_I64 = b"before_seq=9223372036854775808"


def upstream_before_seq(db_path: str) -> Any:
    """The reference answering a mailbox before_seq above 2^63-1 as upstream does (ERRATA 4): 500 storage_failure."""
    ledger = aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)
    original = ledger.service.handle

    def handle(method: str, target: Any, headers: Any, body: bytes = b"", **options: Any) -> Any:
        raw = target.encode("latin-1") if isinstance(target, str) else target
        if method == "GET" and b"/handoffs?" in raw and _ABOVE_I64 in raw:
            return Response(500, (("content-type", "application/json"),),
                            b'{"error":{"code":"storage_failure","message":"storage failure"}}')
        return original(method, target, headers, body, **options)  # the gateway's on_behalf flag

    ledger.service.handle = handle
    return ledger
