"""An httpx transport that hands requests straight to the service: embedded mode, no socket."""

from __future__ import annotations

import httpx

from .asgi import Handles

__all__ = ["LedgerTransport"]


class LedgerTransport(httpx.BaseTransport):
    """Runs each request through ``Service.handle`` in the calling thread."""

    def __init__(self, service: Handles) -> None:
        self._service = service

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        headers = [(k.lower(), v) for k, v in request.headers.raw]
        response = self._service.handle(request.method, request.url.raw_path, headers, body)
        out = list(response.headers) + [("content-length", str(len(response.body)))]
        return httpx.Response(response.status, headers=out, content=response.body, request=request)
