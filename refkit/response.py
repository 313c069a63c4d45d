"""What a sans-IO reference answers: status, headers and body, exactly as they go on the wire."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from .jsonvalue import Json

__all__ = ["Response", "MAX_BODY_BYTES"]

# Both references refuse a larger request body (upstream's srv/lib.rs MAX_COMMAND_BODY_BYTES);
# the ASGI adapter reads no more than this plus one byte.
MAX_BODY_BYTES: Final = 1_048_576


@dataclass(frozen=True, slots=True, init=False)
class Response:
    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...] = (), body: bytes = b"") -> None:
        # The generated __init__'s work through the slots' own setters: a request-path shortcut,
        # explained in aidememo_ref/_hot.py with the others.
        _SET_STATUS(self, status)
        _SET_HEADERS(self, headers)
        _SET_BODY(self, body)

    def json(self) -> Json:
        value: Json = json.loads(self.body)
        return value


_SET_STATUS, _SET_HEADERS, _SET_BODY = (vars(Response)[name].__set__ for name in ("status", "headers", "body"))
