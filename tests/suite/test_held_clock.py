"""AM-HL-HB-4 holds the test clock still; a target whose test clock cannot hold leaves it not scored.

A test clock written to the older extension (``{"advance_ms": N}`` only) refuses the ``hold`` key
with 400: the requirement is then not scored, with the reason, rather than failed (the target did
nothing wrong) or passed (nothing was judged).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.errors import NotScored, Untestable
from conformance.http import Exchange
from conformance.profiles.aidememo.target import advance_clock
from conformance.transcript import Transcript


class _Clock:
    """A wire to a test clock that answers every move with ``status``."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.bodies: list[Any] = []

    def request(self, transcript: Transcript | None, method: str, path: str, **kwargs: Any) -> Exchange:
        self.bodies.append(kwargs.get("json_body"))
        body = b'{"now_ms": 5}' if self.status == 200 else b'{"error":{"code":"invalid_command","message":"no"}}'
        return Exchange(method=method, url=path, request_headers=(), request_body=b"", status=self.status, body=body)


def test_a_refused_hold_is_not_scored_and_a_refused_move_untestable() -> None:
    wire = _Clock(400)
    with pytest.raises(NotScored, match="cannot hold still"):
        advance_clock(wire, Transcript(), 0, hold=True)
    with pytest.raises(Untestable, match="answered 400") as raised:
        advance_clock(wire, Transcript(), 0)
    assert not isinstance(raised.value, NotScored)
    assert wire.bodies == [{"advance_ms": 0, "hold": True}, {"advance_ms": 0}]
    assert advance_clock(_Clock(200), Transcript(), 7, hold=True) == 5
