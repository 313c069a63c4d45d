"""The XMemo reference's exception tree and its wire form (spec §2.3).

::

    XMemoError                 root of everything xmemo_ref raises
    ├── RequestError           a refusal answered over HTTP: status + FastAPI-style ``detail``
    ├── ProvisionError         bootstrap refused; one line for the command line
    ├── StoreError             a database file the store cannot open or upgrade; one line
    ├── KeyChanged             (internal) a key's answer changed under a request: check it again
    └── XMemoClientError       client side (``xmemo_ref.client``)
        ├── XMemoHTTPError     the server answered a non-2xx status
        └── XMemoTransportError no answer (connection, timeout, or an unreadable body)

Error bodies follow the forms the published clients parse: ``{"detail": "text"}``, and for
validation ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`` with status 422.
"""

from __future__ import annotations

from typing import Final, TypedDict

__all__ = [
    "XMemoError",
    "RequestError",
    "ProvisionError",
    "StoreError",
    "KeyChanged",
    "XMemoClientError",
    "XMemoHTTPError",
    "XMemoTransportError",
    "ValidationItem",
    "NOT_AUTHENTICATED",
    "INVALID_KEY",
]

NOT_AUTHENTICATED: Final = "Not authenticated"  # FastAPI's security dependencies' text
INVALID_KEY: Final = "Invalid or inactive API Key"  # the hosted service's text (CLI skill tests)



class ValidationItem(TypedDict):
    """One entry of a 422 ``detail`` list, as FastAPI (pydantic) writes it."""

    loc: list[str | int]
    msg: str
    type: str


class XMemoError(Exception):
    """Root of the XMemo reference's exceptions."""


class RequestError(XMemoError):
    """A request refused with ``status`` and a FastAPI-style ``detail``."""

    def __init__(self, status: int, detail: str | list[ValidationItem], *, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(detail if isinstance(detail, str) else f"{status} validation error")
        self.status = status
        self.detail = detail
        self.headers = headers

    @classmethod
    def unauthenticated(cls) -> RequestError:
        """401: no credential was sent (the only case that answers 401)."""
        return cls(401, NOT_AUTHENTICATED, headers=(("www-authenticate", "Bearer"),))

    @classmethod
    def invalid_key(cls) -> RequestError:
        """403: a credential was sent but it is unknown, inactive or malformed."""
        return cls(403, INVALID_KEY)

    @classmethod
    def missing_scope(cls, scope: str) -> RequestError:
        return cls(403, f"Missing required scope: {scope}")

    @classmethod
    def forbidden(cls, detail: str) -> RequestError:
        return cls(403, detail)

    @classmethod
    def not_found(cls, detail: str = "Not Found") -> RequestError:
        return cls(404, detail)

    @classmethod
    def conflict(cls, detail: str) -> RequestError:
        return cls(409, detail)

    @classmethod
    def too_large(cls) -> RequestError:
        return cls(413, "Request body too large")

    @classmethod
    def invalid(cls, items: list[ValidationItem]) -> RequestError:
        return cls(422, items)

    @classmethod
    def invalid_field(cls, loc: tuple[str | int, ...], msg: str, kind: str = "value_error") -> RequestError:
        return cls(422, [ValidationItem(loc=list(loc), msg=msg, type=kind)])

    @classmethod
    def unavailable(cls) -> RequestError:
        return cls(503, "Storage temporarily unavailable")

    @classmethod
    def internal(cls) -> RequestError:
        return cls(500, "Internal Server Error")


class ProvisionError(XMemoError):
    """``aidememo-ref xmemo bootstrap`` refused: the message is one line."""


class StoreError(XMemoError):
    """The database file cannot be opened as an XMemo store (another layout, a damaged log): one line."""


class KeyChanged(XMemoError):
    """The store found that the key a request was checked with changed since (another connection
    revoked or bound it): the service answers the request again with a fresh check. Never leaves
    the service."""


class XMemoClientError(XMemoError):
    """Root of the client helpers' errors."""


class XMemoHTTPError(XMemoClientError):
    """The server answered ``status``; ``detail`` is its error detail when it sent one."""

    def __init__(self, status: int, detail: object, audit_id: str | None) -> None:
        super().__init__(f"XMemo answered {status}: {detail}")
        self.status = status
        self.detail = detail
        self.audit_id = audit_id


class XMemoTransportError(XMemoClientError):
    """No usable answer: connection refused or reset, timeout, or a body that is not JSON."""
