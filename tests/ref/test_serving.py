"""``serve_in_thread`` stops when told, and still stops gracefully: a request in flight is
answered, a client still connected is disconnected, and the port is closed afterwards."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import pytest

from refkit.serving import serve_in_thread


class _App:
    """An ASGI app that answers 200 after ``delay_s`` (so a request can be in flight at the stop)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.started = threading.Event()

    @property
    def asgi(self) -> Any:
        import asyncio

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            self.started.set()
            await asyncio.sleep(self.delay_s)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"ok"})

        return app


def _refused(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return True
    return False


def test_a_server_without_clients_stops_and_closes_its_port() -> None:
    before = threading.active_count()
    with serve_in_thread(_App()) as url:
        answer = httpx.get(f"{url}/health")
        assert answer.status_code == 200 and answer.text == "ok" and "date" in answer.headers
    assert _refused(url)
    assert threading.active_count() == before


def test_a_request_in_flight_at_the_stop_is_answered() -> None:
    app = _App(delay_s=0.3)
    answers: list[httpx.Response] = []
    with serve_in_thread(app) as url:
        client = threading.Thread(target=lambda: answers.append(httpx.get(f"{url}/slow", timeout=10)))
        client.start()
        assert app.started.wait(5)
    client.join(10)
    assert [a.status_code for a in answers] == [200] and answers[0].text == "ok"
    assert _refused(url)


def test_a_client_still_connected_at_the_stop_is_disconnected() -> None:
    with httpx.Client() as client:
        with serve_in_thread(_App()) as url:
            assert client.get(f"{url}/one").status_code == 200  # the connection stays open (keep-alive)
        deadline = time.monotonic() + 5
        with pytest.raises(httpx.TransportError):
            while time.monotonic() < deadline:  # the kept-alive connection was closed, the port too
                client.get(f"{url}/two", timeout=2)
    assert _refused(url)
