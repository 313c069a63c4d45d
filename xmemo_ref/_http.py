"""The HTTP pieces both adapters share: a request record, JSON answers, credentials, agent headers.

Credentials (spec §2.1, §2.3): ``X-API-Key: <key>`` or ``Authorization: Bearer <key>``. Only a
request that carries no credential at all answers 401; a credential that is unknown, inactive,
malformed, or two credentials that disagree answer 403, as the hosted service does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from refkit.records import distinct
from refkit.response import Response

from ._codec import compact_json
from ._errors import RequestError

__all__ = [
    "HttpRequest",
    "json_response",
    "error_response",
    "credential",
    "agent_header",
    "AGENT_HEADER",
    "INSTANCE_HEADER",
    "AUDIT_HEADER",
    "MAX_KEY_BYTES",
]

AGENT_HEADER: Final = "x-memory-os-agent-id"
INSTANCE_HEADER: Final = "x-memory-os-agent-instance-id"
AUDIT_HEADER: Final = "X-XMemo-Audit-ID"
MAX_KEY_BYTES: Final = 4_096
MAX_AGENT_ID_CHARS: Final = 128
_JSON: Final = (("content-type", "application/json"),)
_VISIBLE: Final = re.compile(r"[!-~]*\Z")  # visible ASCII: 0x21 to 0x7E
_tuple_new: Final = tuple.__new__


@distinct
class HttpRequest(NamedTuple):
    """One request as the routes see it (a tuple record: one is built per request)."""

    method: str
    query: str
    headers: dict[str, str]  # lower-cased names; the first of repeated headers wins
    body: bytes
    deferred: bool = True  # the key may be checked against what the store last read (``principal``)

    @classmethod
    def build(cls, method: str, query: str, pairs: Iterable[tuple[bytes, bytes]], body: bytes,
              deferred: bool = True) -> HttpRequest:
        headers: dict[str, str] = {}
        for name, value in pairs:
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        return _tuple_new(cls, (method, query, headers, body, deferred))  # cls(...), positionally: see _hot


def json_response(value: object, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    body = value if isinstance(value, str) else compact_json(value)
    return Response(status, _JSON + headers, body.encode("utf-8"))


def error_response(error: RequestError) -> Response:
    return json_response({"detail": error.detail}, error.status, error.headers)


def _visible_ascii(value: str) -> bool:
    return _VISIBLE.match(value) is not None


def credential(headers: dict[str, str]) -> str:
    """The one API key this request carries; 401 when it carries none, 403 when it is unusable."""
    api_key = headers.get("x-api-key", "").strip() or None
    authorization = headers.get("authorization", "").strip()
    bearer = None
    if authorization[:7].lower() == "bearer ":
        bearer = authorization[7:].strip() or None
    if api_key is None and bearer is None:
        raise RequestError.unauthenticated()
    if api_key is not None and bearer is not None and api_key != bearer:
        raise RequestError.invalid_key()
    key = api_key or bearer
    assert key is not None
    if len(key.encode("latin-1")) > MAX_KEY_BYTES or not _visible_ascii(key):
        raise RequestError.invalid_key()
    return key


def agent_header(headers: dict[str, str], name: str) -> str | None:
    """An attribution header's value (never authority), or None; 422 when it is not a usable label."""
    value = headers.get(name, "").strip()
    if not value:
        return None
    if len(value) > MAX_AGENT_ID_CHARS or not _visible_ascii(value.replace(" ", "_")):
        raise RequestError.invalid_field(("header", name), f"must be 1 to {MAX_AGENT_ID_CHARS} visible characters")
    return value
