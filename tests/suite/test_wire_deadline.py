"""The whole-request deadline of a served target's requests: one thread per process shuts the
socket of a request that outlives it (a server trickling a byte per read would hold it for hours
otherwise), and never touches a request that finished."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from conformance.errors import TargetError
from conformance.http import Wire


def _serve(trickle: bool) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            if not trickle:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(0.05):  # a byte per read, each well within the read timeout
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


@pytest.fixture
def trickling() -> Iterator[str]:
    yield from _serve(trickle=True)


@pytest.fixture
def prompt() -> Iterator[str]:
    yield from _serve(trickle=False)


def test_concurrent_trickled_answers_each_end_at_their_own_deadline(trickling: str) -> None:
    wire = Wire(trickling, timeout_s=1.0, max_body_bytes=1 << 20)
    errors: list[str] = []
    took: list[float] = []

    def one() -> None:
        began = time.monotonic()
        try:
            wire.request(None, "GET", "/health")
        except TargetError as exc:
            errors.append(str(exc))
        took.append(time.monotonic() - began)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    wire.close()
    assert len(errors) == 3 and all("deadline" in error for error in errors), errors
    assert all(0.9 <= seconds < 10 for seconds in took), took


def test_answered_requests_are_never_shut_and_start_no_thread_each(prompt: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    wire = Wire(prompt, timeout_s=0.5, max_body_bytes=1 << 20)
    wire.request(None, "GET", "/health")  # the process's deadline thread, if not yet started
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        if threading.current_thread() is threading.main_thread():  # not the test server's answering threads
            started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for _ in range(20):
        assert wire.request(None, "GET", "/health").status == 200
    time.sleep(0.8)  # past every deadline: a finished request's entry must not fire into a later one
    assert wire.request(None, "GET", "/health").status == 200
    wire.close()
    assert started == []
