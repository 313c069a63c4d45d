"""A server that hangs, resets, babbles or floods gets FAIL/UNTESTABLE verdicts, never a hung run."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

FIXED = """
url = "{url}"
timeout_s = 1

[[provision.tokens]]
project = "hostile"
actor = "w1"
role = "writer"
token = "hostile-token-1"

[[provision.tokens]]
project = "hostile"
actor = "w2"
role = "writer"
token = "hostile-token-2"
"""


def _answer(mode: str, conn: socket.socket, stop: threading.Event) -> None:
    conn.settimeout(5)
    try:
        conn.recv(65536)
        if mode == "hang":
            stop.wait(30)
        elif mode == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif mode == "garbage":
            conn.sendall(b"\x00\x01\x02 this is not HTTP\r\n\r\n")
        elif mode == "not-json":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n"
                         b"Connection: close\r\n\r\nnot json!")
        elif mode == "empty-object":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                         b"Connection: close\r\n\r\n{}")
        elif mode == "flood":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
            chunk = b"1," * 32768
            while not stop.is_set():
                conn.sendall(chunk)
    except OSError:
        pass
    finally:
        conn.close()


@contextmanager
def hostile_server(mode: str) -> Iterator[str]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=_answer, args=(mode, conn, stop), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


@pytest.mark.parametrize("mode", ["hang", "reset", "garbage", "not-json", "empty-object", "flood"])
def test_hostile_target_fails_in_bounded_time(tmp_path, mode):
    with hostile_server(mode) as url:
        config = tmp_path / "target.toml"
        config.write_text(FIXED.format(url=url))
        report = tmp_path / "report"
        # The timeout guards against a hung run; it is not a performance assertion.
        done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--config", str(config),
                               "--report-dir", str(report), "--seed", "3"],
                              capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, f"exit {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    assert "Traceback" not in done.stderr
    records = json.loads((report / "results.json").read_text())["records"]
    verdicts = {r["verdict"] for r in records}
    assert verdicts <= {"FAIL", "WARN", "UNTESTABLE", "SKIP"}, f"unexpected verdicts {verdicts}"  # WARN: SHOULDs
    health = next(r for r in records if r["requirement"] == "AM-HEALTH-1")
    assert health["verdict"] == "FAIL", health
    assert health["transcript"], "the failing check carries its transcript"
    assert "report.html" in done.stdout and (report / "report.html").exists()
