"""One request seam between the remote flow and a server: ``AideMemoClient`` with upstream's errors.

Everything goes through the kit's httpx client, so the one identical retry of a POST after a
transport failure (the server's receipt replay makes it safe) is the client's, and a test or the
simulator can hand in any httpx transport. The client's failures become the remote flow's tree
with upstream's wording (``remote server returned HTTP 409: …``) through ``client_errors``.
"""

from __future__ import annotations

from typing import Any

import httpx

from aidememo_client.client import AideMemoClient

from ._errors import RemoteHTTPError, client_errors, refusal
from ._profiles import RemoteProfile

__all__ = ["Remote", "MAILBOX_LIMIT"]

MAILBOX_LIMIT = range(1, 101)


class Remote:
    """The server as one profile sees it. Use as a context manager or call ``close``."""

    def __init__(self, profile: RemoteProfile, *, transport: httpx.BaseTransport | None = None,
                 timeout: float = 30.0) -> None:
        self.profile = profile
        if transport is None and profile.url.startswith("http://"):
            # A plain-HTTP base never performs a TLS handshake (redirects are not followed), so
            # skip loading the CA bundle: it is most of a command's start-up time.
            transport = httpx.HTTPTransport(verify=False)
        with client_errors():
            self._client = AideMemoClient(profile.url, profile.token, profile.project_id, transport=transport,
                                          timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base(self) -> str:
        return f"/v1/projects/{self.profile.project_id}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None) -> Any:
        with client_errors():
            if method == "POST":
                assert body is not None
                return self._client.post(path, body)
            return self._client.get(path, params)

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self._call("GET", f"{self.base}{path}", params=params)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST once, and once more with the identical body after a transport failure."""
        return self._call("POST", f"{self.base}{path}", body=body)

    # -- the reads the flow needs ------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = self.get("/identity")
        return identity

    def status(self, handoff_id: str) -> dict[str, Any]:
        status: dict[str, Any] = self.get(f"/handoffs/{handoff_id}")
        return status

    def mailbox(self, box: str, source_id: str | None, include_completed: bool, limit: int) -> dict[str, Any]:
        if limit not in MAILBOX_LIMIT:
            raise refusal("remote handoff limit must be between 1 and 100")
        params: dict[str, Any] = {"box": box, "include_completed": include_completed, "limit": limit}
        if source_id is not None:
            params["source_id"] = source_id
        page: dict[str, Any] = self.get("/handoffs", params)
        return page

    def resource_body(self, kind: str, resource_id: str) -> dict[str, Any] | None:
        """The current body of a visible resource, or None when the server answers 404."""
        try:
            answer = self.get(f"/resources/{kind}/{resource_id}")
        except RemoteHTTPError as exc:
            if exc.status == 404:
                return None
            raise
        state = answer.get("state") if isinstance(answer, dict) else None
        body = state.get("body") if isinstance(state, dict) else None
        return body if isinstance(body, dict) else None
