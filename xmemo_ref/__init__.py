"""xmemo_ref: a reference XMemo memory service and the SDK's workflow helpers.

The rules are a pure core (``_boundary`` for who wrote what, ``_recall`` for ranking and the
bounded packet, ``_writes`` for capture, ``_decode`` for input); ``_sqlite`` stores them one
transaction per write; ``_service`` (REST) and ``_mcp`` (streamable-HTTP MCP) are thin adapters
over ``_operations``. ``client`` is an httpx client with the SDK's helper names that works
against any XMemo server. Names are imported lazily.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "XMemoReference",
    "provision_key",
    "default_tenant",
    "Rules",
    "SQLiteXMemoStore",
    "XMemoError",
    "ProvisionError",
    "RequestError",
    "Relation",
    "Trust",
    "MemoryType",
    "estimate_tokens",
    "XMemoClient",
    "CaptureResult",
    "XMemoClientError",
    "XMemoHTTPError",
    "XMemoTransportError",
]

_WHERE = {
    "XMemoReference": "_reference",
    "provision_key": "_provision",
    "default_tenant": "_provision",
    "Rules": "_operations",
    "SQLiteXMemoStore": "_sqlite",
    "XMemoError": "_errors",
    "ProvisionError": "_errors",
    "RequestError": "_errors",
    "Relation": "_records",
    "Trust": "_records",
    "MemoryType": "_records",
    "estimate_tokens": "_recall",
    "XMemoClient": "client",
    "CaptureResult": "client",
    "XMemoClientError": "_errors",
    "XMemoHTTPError": "_errors",
    "XMemoTransportError": "_errors",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'xmemo_ref' has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
