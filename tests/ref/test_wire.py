"""The client's plain ``http://`` wire: framing without bytes, then against the standard library's server.

The plain wire replaces httpx only for the command line's start-up, so every test here holds it
to httpx: the same request on the wire, the same decoded answers and the same failures.
"""

from __future__ import annotations

import io
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from aidememo_client._plain import ConnectError, PlainWire, RemoteProtocolError, read_answer
from aidememo_client._wire import HttpxWire, NoAnswer
from aidememo_client.client import AideMemoClient
from aidememo_client.errors import AideMemoHTTPError, ClientRefusal, OutcomeUnknown


def test_framing_by_length_chunks_and_end_of_connection() -> None:
    assert read_answer(io.BytesIO(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}tail")).content == b"{}"
    chunked = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n[1,\r\n2\r\n2]\r\n0\r\nT: 1\r\n\r\n"
    assert read_answer(io.BytesIO(chunked))[:2] == (201, b"[1,2]")
    assert read_answer(io.BytesIO(b"HTTP/1.0 404 Not Found\r\n\r\nnone")).content == b"none"
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    assert read_answer(io.BytesIO(interim))[:2] == (204, b"")


def test_the_charset_of_an_error_text_is_the_servers() -> None:
    answer = read_answer(io.BytesIO(b"HTTP/1.1 500 x\r\nContent-Type: text/plain; charset=latin-1\r\n"
                                    b"Content-Length: 1\r\n\r\n\xe9"))
    assert answer.text == "\u00e9"
    assert read_answer(io.BytesIO(b"HTTP/1.1 500 x\r\nContent-Length: 1\r\n\r\n\xe9")).text == "\ufffd"


@pytest.mark.parametrize("raw", [
    b"",  # closed before a byte
    b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",  # body cut short
    b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}",  # two lengths
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # chunk size not hex
    b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
])
def test_a_broken_answer_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        read_answer(io.BytesIO(raw))


Seen = dict[str, Any]


@contextmanager
def recording_server(answer: Callable[[Seen], tuple[int, bytes]]) -> Iterator[tuple[str, list[Seen]]]:
    """The standard library's HTTP server on a loopback port, recording each request it is sent."""
    seen: list[Seen] = []

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = {"method": self.command, "target": self.path, "body": self.rfile.read(length),
                       "authorization": self.headers.get("Authorization"),
                       "content_type": self.headers.get("Content-Type")}
            seen.append(request)
            status, body = answer(request)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/prefix", seen
    finally:
        server.shutdown()
        server.server_close()


def echo(request: Seen) -> tuple[int, bytes]:
    return 200, json.dumps({"target": request["target"]}).encode()


def test_the_plain_wire_sends_what_httpx_sends() -> None:
    body = {"command_id": "c1", "payload": {"text": "caf\u00e9 \u2603", "n": 1.5, "none": None}}
    query = {"box": "inbox", "source_id": "project:a b/c", "limit": 20}
    with recording_server(echo) as (url, seen):
        headers = {"Authorization": "Bearer t0ken"}
        for wire in (PlainWire(url, headers, 5.0), HttpxWire(url, headers, None, 5.0)):
            assert json.loads(wire.exchange("GET", "/v1/x", query, None).content)["target"].startswith("/prefix/v1/x?")
            wire.exchange("POST", "/v1/commands", {}, body)
            wire.close()
    plain, httpx_sent = seen[:2], seen[2:]
    assert plain == httpx_sent
    assert plain[1]["content_type"] == "application/json" and plain[0]["authorization"] == "Bearer t0ken"


def test_answers_decode_alike_through_either_wire() -> None:
    def answer(request: Seen) -> tuple[int, bytes]:
        if request["target"].endswith("/conflict"):
            return 409, b'{"error":{"code":"revision_conflict","message":"stale revision"}}'
        return 200, b'{"ok":true}'

    with recording_server(answer) as (url, _):
        plain = AideMemoClient(url, "t0ken", "p")
        kept = AideMemoClient(url, "t0ken", "p", transport=httpx.HTTPTransport())
        for client in (plain, kept):
            assert client.get("/v1/ok") == {"ok": True}
            with pytest.raises(AideMemoHTTPError) as info:
                client.post("/v1/conflict", {"command_id": "c"})
            assert (info.value.status, info.value.code, info.value.message) == (409, "revision_conflict", "stale revision")
            client.close()
    assert isinstance(plain._wire, PlainWire) and isinstance(kept._wire, HttpxWire)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_no_server_is_an_unknown_outcome_named_as_httpx_names_it() -> None:
    client = AideMemoClient(f"http://127.0.0.1:{free_port()}", "t0ken", "p")
    with pytest.raises(OutcomeUnknown, match="ConnectError") as info:
        client.post("/v1/commands", {"command_id": "c"})
    assert isinstance(info.value.cause, ConnectError)
    with pytest.raises(NoAnswer):
        PlainWire(f"http://127.0.0.1:{free_port()}", {}, 5.0).exchange("GET", "/", {}, None)


def test_a_post_whose_answer_is_lost_is_sent_once_more_identically() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        for attempt in range(2):
            conn, _ = listener.accept()
            with conn:
                data = b""
                while not data.endswith(b'"c"}'):
                    data += conn.recv(65536)
                received.append(data)
                if attempt == 1:
                    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"ok":true}')

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = AideMemoClient(f"http://127.0.0.1:{listener.getsockname()[1]}", "t0ken", "p")
    assert client.post("/v1/commands", {"command_id": "c"}) == {"ok": True}
    thread.join(10)
    listener.close()
    assert len(received) == 2 and received[0] == received[1]


@pytest.mark.parametrize("url", ["http://", "http://host:notaport", "http://[::1"])
def test_a_bad_url_is_a_refusal_that_never_shows_the_token(url: str) -> None:
    with pytest.raises(ClientRefusal) as info:
        AideMemoClient(url, "s3cret-token", "p")
    assert "s3cret-token" not in str(info.value)
