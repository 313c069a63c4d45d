"""Planted client bugs, for ``aidememo-sim clients --client tests/sim/client_mutants.py:NAME``.

Each is the kit's remote client with its recovery broken in one place, as a client author could
break it; ``tests/sim/test_clients.py`` shows the judges catch each one.
"""

from __future__ import annotations

from collections.abc import Mapping

from aidememo_client.client import AideMemoClient, OutcomeUnknown
from aidememo_wire.shapes import JSON


class RefreshingRetryClient(AideMemoClient):
    """After a lost answer it re-reads the handoff and posts again under a new command id at the
    fresh revision, instead of resending the identical body."""

    def post(self, path: str, body: Mapping[str, object]) -> JSON:
        try:
            return self._send("POST", path, body=body)
        except OutcomeUnknown:
            fresh = self.get(path.rsplit("/", 1)[0])
            assert isinstance(fresh, dict)
            return self._send("POST", path, body={**body, "command_id": f"{body['command_id']}-again",
                                                  "expected_revision": fresh["revision"]})
