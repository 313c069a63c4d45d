"""A prerequisite step's odd answer makes a check untestable, never a crash blamed on the kit.

Found by the hostile wrong-shapes server: a read answering ``{"revision": "one"}`` raised
``ValueError`` inside a command-id check, which the plugin reports as the kit's own ERROR.
"""

from __future__ import annotations

import json

import pytest

from conformance.errors import Untestable
from conformance.http import Exchange
from conformance.profiles.aidememo.actors import setup_revision


def _answer(status: int, body: object) -> Exchange:
    return Exchange(method="GET", url="http://target/v1/x", request_headers=(), request_body=b"", status=status,
                    body=json.dumps(body).encode())


@pytest.mark.parametrize("body", [{"revision": "one"}, {"revision": True}, {"revision": 0}, {}, [], None,
                                  {"revision": 1.5}])
def test_a_revision_that_is_not_a_positive_integer_is_untestable(body: object) -> None:
    with pytest.raises(Untestable):
        setup_revision(_answer(200, body), "read the resource")


def test_a_failed_step_is_untestable() -> None:
    with pytest.raises(Untestable):
        setup_revision(_answer(409, {"error": "stale"}), "read the resource")


def test_a_positive_integer_revision_is_returned() -> None:
    assert setup_revision(_answer(200, {"revision": 3, "other": "x"}), "read the resource") == 3
