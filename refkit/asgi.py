"""ASGI adapter: bytes off the socket into ``Service.handle`` and back. No rules live here.

Storage calls block, so each request runs on the event loop's thread pool (each worker thread
keeps its own SQLite connection). Bodies are read only up to the 1 MiB limit plus one byte:
an oversized body is refused without buffering the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from .response import MAX_BODY_BYTES, Response

__all__ = ["ASGIApp", "Handles", "create_asgi"]

# ASGI 3's own shapes: scopes and messages are dicts whose keys depend on their "type".
ASGIScope = MutableMapping[str, Any]
ASGIMessage = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[ASGIMessage]]
ASGISend = Callable[[ASGIMessage], Awaitable[None]]
ASGIApp = Callable[[ASGIScope, ASGIReceive, ASGISend], Awaitable[None]]


class Handles(Protocol):
    """A sans-IO HTTP service: the AideMemo ``Service`` and the XMemo reference's service both are."""

    def handle(self, method: str, target: str | bytes, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> Response:
        ...


def create_asgi(service: Handles) -> ASGIApp:
    """An ASGI 3 application serving ``service``."""

    async def app(scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more and size <= MAX_BODY_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        target = scope.get("raw_path") or scope["path"].encode("utf-8")
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        loop = asyncio.get_running_loop()
        response = await loop.run_in_executor(
            None, service.handle, scope["method"], target, scope["headers"], body
        )
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        headers.append((b"content-length", str(len(response.body)).encode()))
        if more:
            # The rest of an oversized body is never read; do not reuse this connection.
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})

    return app
