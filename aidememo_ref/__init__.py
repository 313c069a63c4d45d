"""aidememo_ref: a reference AideMemo ledger that speaks the real remote wire protocol.

The rules are a pure core (``_state``, ``_ledger``, ``_visibility``); SQLite storage, the
request service, the ASGI adapter and the httpx client are thin layers around it. Names are
imported lazily so that the token-free local command line starts without the server stack;
type checkers read the real definitions through the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aidememo_wire.canonical import canonical_json, fingerprint
    from refkit.clock import Clock, ManualClock, OffsetClock, SystemClock
    from aidememo_wire.errors import ErrorCode, LedgerError
    from aidememo_wire.ids import bearer_digest, stable_claim_id, stable_operation_id
    from ._reference import Provisioning, ReferenceLedger, provision, serve_in_thread
    from ._service import Response
    from ._sqlite import ProvisionError
    from refkit.process import ReferenceProcess, ServerStartError
    from aidememo_client.client import AideMemoClient, AideMemoClientError, AideMemoHTTPError, ClientRefusal, OutcomeUnknown

__all__ = [
    "ReferenceLedger",
    "provision",
    "Provisioning",
    "serve_in_thread",
    "ReferenceProcess",
    "ServerStartError",
    "ProvisionError",
    "Clock",
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
    "AideMemoClientError",
    "AideMemoHTTPError",
    "ClientRefusal",
    "OutcomeUnknown",
]

_WHERE = {
    "ReferenceLedger": "_reference",
    "provision": "_reference",
    "Provisioning": "_reference",
    "serve_in_thread": "_reference",
    "ReferenceProcess": "process",
    "ServerStartError": "process",
    "ProvisionError": "_sqlite",
    "Clock": "_clock",
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
    "AideMemoClientError": "client",
    "AideMemoHTTPError": "client",
    "ClientRefusal": "client",
    "OutcomeUnknown": "client",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'aidememo_ref' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
