"""aidememo_client: a client for any AideMemo server, and its recovery planner.

This is the client's public home::

    from aidememo_client import AideMemoClient, AideMemoClientError, OutcomeUnknown

``AideMemoClient`` (``client``) is one actor's view of one project; everything it raises derives
from ``AideMemoClientError`` (the tree is drawn in ``errors``). The names are imported lazily, so
that importing ``aidememo_client.errors`` or ``aidememo_client.recovery`` (as the command line's
remote flow does) loads nothing else; their classes name this package as their module, so
reprs and tracebacks show the public path.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aidememo_client.client import AcceptResult, AideMemoClient, HeartbeatResult, ReturnResult
    from aidememo_client.errors import (
        AideMemoClientError,
        AideMemoHTTPError,
        ClientRefusal,
        MalformedAnswer,
        OutcomeUnknown,
    )

__all__ = [
    "AideMemoClient",
    "AcceptResult",
    "HeartbeatResult",
    "ReturnResult",
    "AideMemoClientError",
    "ClientRefusal",
    "MalformedAnswer",
    "AideMemoHTTPError",
    "OutcomeUnknown",
]

_WHERE = {
    "AideMemoClient": "aidememo_client.client",
    "AcceptResult": "aidememo_client.client",
    "HeartbeatResult": "aidememo_client.client",
    "ReturnResult": "aidememo_client.client",
    "AideMemoClientError": "aidememo_client.errors",
    "ClientRefusal": "aidememo_client.errors",
    "MalformedAnswer": "aidememo_client.errors",
    "AideMemoHTTPError": "aidememo_client.errors",
    "OutcomeUnknown": "aidememo_client.errors",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'aidememo_client' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
