"""aidememo_ref: a reference AideMemo ledger that speaks the real remote wire protocol.

The rules are a pure core (``_state``, ``_ledger``, ``_visibility``); SQLite and PostgreSQL
storage, the request service and the HTTP MCP gateway are thin layers around it. This package is
also the server's documented facade: the names below come from the server and from the packages
it stands on (``refkit``, ``aidememo_wire``); the client's home is ``aidememo_client``. They are
imported lazily, so that importing one server module, ``python -m aidememo_ref`` or the
documented alias modules (``aidememo_ref.wire``, ``aidememo_ref.process``) loads nothing else;
type checkers read the real definitions through the ``TYPE_CHECKING`` imports below. Every
exception the server defines derives from ``AideMemoRefError``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aidememo_wire.canonical import canonical_json, fingerprint
    from refkit.clock import Clock, ManualClock, OffsetClock, SystemClock
    from aidememo_wire.errors import ErrorCode, LedgerError
    from aidememo_wire.ids import bearer_digest, stable_claim_id, stable_operation_id
    from aidememo_ref._reference import Provisioning, ReferenceLedger, provision
    from refkit.serving import serve_in_thread
    from refkit.response import Response
    from aidememo_ref._errors import AideMemoRefError
    from aidememo_ref._gateway import BindingsError
    from aidememo_ref._provision import ProvisionError, StoreError
    from refkit.process import ReferenceProcess, ServerStartError

__all__ = [
    "ReferenceLedger",
    "provision",
    "Provisioning",
    "serve_in_thread",
    "ReferenceProcess",
    "ServerStartError",
    "AideMemoRefError",
    "ProvisionError",
    "StoreError",
    "BindingsError",
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
]

_WHERE = {
    "ReferenceLedger": "aidememo_ref._reference",
    "provision": "aidememo_ref._reference",
    "Provisioning": "aidememo_ref._reference",
    "serve_in_thread": "refkit.serving",
    "ReferenceProcess": "refkit.process",
    "ServerStartError": "refkit.process",
    "AideMemoRefError": "aidememo_ref._errors",
    "ProvisionError": "aidememo_ref._provision",
    "StoreError": "aidememo_ref._provision",
    "BindingsError": "aidememo_ref._gateway",
    "Clock": "refkit.clock",
    "SystemClock": "refkit.clock",
    "ManualClock": "refkit.clock",
    "OffsetClock": "refkit.clock",
    "ErrorCode": "aidememo_wire.errors",
    "LedgerError": "aidememo_wire.errors",
    "Response": "refkit.response",
    "canonical_json": "aidememo_wire.canonical",
    "fingerprint": "aidememo_wire.canonical",
    "stable_operation_id": "aidememo_wire.ids",
    "stable_claim_id": "aidememo_wire.ids",
    "bearer_digest": "aidememo_wire.ids",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'aidememo_ref' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
