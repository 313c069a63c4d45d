"""aidememo_ref: a reference AideMemo ledger that speaks the real remote wire protocol.

The rules are a pure core (``_state``, ``_ledger``, ``_visibility``); SQLite storage, the
request service, the ASGI adapter and the httpx client are thin layers around it. Names are
imported lazily so that the token-free local command line starts without the server stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "ReferenceLedger",
    "provision",
    "serve_in_thread",
    "ProvisionError",
    "SystemClock",
    "ManualClock",
    "OffsetClock",
    "ErrorCode",
    "LedgerError",
    "Response",
    "canonical_json",
    "fingerprint",
    "stable_operation_id",
    "stable_claim_id",
    "bearer_digest",
    "AideMemoClient",
    "AideMemoHTTPError",
]

_WHERE = {
    "ReferenceLedger": "_reference",
    "provision": "_reference",
    "serve_in_thread": "_reference",
    "ProvisionError": "_sqlite",
    "SystemClock": "_clock",
    "ManualClock": "_clock",
    "OffsetClock": "_clock",
    "ErrorCode": "_errors",
    "LedgerError": "_errors",
    "Response": "_service",
    "canonical_json": "_canonical",
    "fingerprint": "_canonical",
    "stable_operation_id": "_ids",
    "stable_claim_id": "_ids",
    "bearer_digest": "_ids",
    "AideMemoClient": "client",
    "AideMemoHTTPError": "client",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'aidememo_ref' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
