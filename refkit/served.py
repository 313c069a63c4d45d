"""The ways to reach a sans-IO reference (AideMemo's ledger, XMemo's memory service): an ASGI
app for a real server, an httpx transport that answers in the calling thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .asgi import ASGIApp, Handles
    from .transport import LedgerTransport

__all__ = ["Served"]


class _Closes(Protocol):
    def close(self) -> None: ...


class Served:
    """Base of a reference object that holds a ``service`` (answers HTTP requests) and a ``store``."""

    service: Handles
    store: _Closes

    @property
    def asgi(self) -> ASGIApp:
        """An ASGI 3 application serving this reference (for uvicorn or any ASGI server)."""
        from .asgi import create_asgi  # the server stack loads only when something serves

        return create_asgi(self.service)

    def transport(self) -> LedgerTransport:
        """An httpx transport that answers in-process through this reference (no socket)."""
        from .transport import LedgerTransport

        return LedgerTransport(self.service)

    def close(self) -> None:
        self.store.close()
