"""The embedded reference answers checks in-process, and over its socket those marked ``real_http``.

A socket per request to a server in a thread was a large part of an embedded run; most checks
judge only the answers' status, headers and JSON, which the in-process transport hands over as
the service made them. Checks whose answers depend on HTTP's bytes (framework answers, malformed
bodies, header and query parsing) keep the socket, so the server's HTTP layer is what they meet.
"""

from __future__ import annotations

import json

pytest_plugins = ["pytester"]

CHECKS = '''
import json
import pytest
from conformance.profiles.aidememo.expect import expect_status

def _seen(world, name):
    exchange = world.wire.request(world.transcript, "GET", "/health")
    expect_status(exchange, 200)
    with open(name, "w") as out:
        json.dump({"server": exchange.header("server"), "same": world.wire is world.runtime.wire}, out)

@pytest.mark.requirement("AM-HEALTH-1")
def test_in_process(world):
    _seen(world, "in_process.json")

@pytest.mark.real_http
@pytest.mark.requirement("AM-HEALTH-1")
def test_over_the_socket(world):
    _seen(world, "socket.json")
'''


def test_real_http_checks_meet_the_servers_http_layer_and_the_rest_the_service(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    in_process = json.loads((pytester.path / "in_process.json").read_text())
    socket = json.loads((pytester.path / "socket.json").read_text())
    assert in_process == {"server": None, "same": True}  # the service's own headers, no HTTP server's
    assert socket["same"] is False and socket["server"] == "uvicorn"  # uvicorn framed this answer
