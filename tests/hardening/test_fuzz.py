"""Hostile requests against every route: no 5xx, no crash, error bodies in the wire shape.

The campaign itself is ``scripts/fuzz.py``; these are its CI-sized runs (in-process and over a
real loopback socket), regressions for what it found, and proof that its judge can fail.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aidememo_ref import ManualClock, ReferenceLedger, serve_in_thread

from .conftest import ROOT
from .contract import contract_problems, malformed_http

SEED = 20261130


@pytest.fixture()
def ledger(tmp_path: Path, fuzz: ModuleType) -> ReferenceLedger:
    ledger = ReferenceLedger(tmp_path / "fuzz.sqlite", clock=ManualClock())
    fuzz.provision_all(ledger)
    fuzz.populate(fuzz.in_process_sender(ledger))
    return ledger


# Found by this fuzzer: integers beyond f64 (or past Python's 4300-digit limit) escaped the JSON
# parser as OverflowError/ValueError, a 500 over HTTP. serde_json answers "number out of range".
@pytest.mark.parametrize("body", [b"1" * 400, b"-" + b"1" * 400, b'{"a":' + b"9" * 5000 + b"}",
                                  b'{"command_id":"c","payload":' + b"7" * 320 + b"}"],
                         ids=["400-digits", "negative-400-digits", "5000-digits-nested", "320-digit-payload"])
def test_numbers_beyond_f64_are_invalid_commands(ledger: ReferenceLedger, body: bytes) -> None:
    response = ledger.handle("POST", "/v1/commands", {"content-type": "application/json"}, body)
    assert response.status == 400
    assert response.json()["error"]["code"] == "invalid_command"
    assert "number out of range" in response.json()["error"]["message"]


def test_in_process_fuzz_finds_no_5xx_and_no_crash(ledger: ReferenceLedger, fuzz: ModuleType) -> None:
    send = fuzz.in_process_sender(ledger)
    tally = fuzz.run_campaign(send, count=400, seed_value=SEED)
    assert tally.tried == 400
    assert (tally.server_errors, tally.crashes, tally.findings) == (0, 0, [])
    assert fuzz.health(send)
    # The strategy reaches past the decoder: some requests are accepted, some refused by rules.
    assert tally.by_status.get(200, 0) > 0 and tally.by_status.get(400, 0) > 0 and tally.by_status.get(401, 0) > 0


def test_http_fuzz_keeps_the_server_serving(ledger: ReferenceLedger, fuzz: ModuleType) -> None:
    with serve_in_thread(ledger) as url:
        host, _, port = url.removeprefix("http://").rpartition(":")
        send = fuzz.http_sender(host, int(port))
        # Over a real socket the answers must also be the documented ones, headers included.
        tally = fuzz.run_campaign(send, count=120, seed_value=SEED + 1, extra=lambda r, s, h, b: contract_problems(
            r.method, r.target.decode("latin-1"), s, h, b, malformed=malformed_http(r.target, r.headers)))
        assert (tally.server_errors, tally.crashes, tally.findings) == (0, 0, [])
        assert fuzz.health(send)


def test_raw_socket_garbage_never_earns_a_5xx(ledger: ReferenceLedger, fuzz: ModuleType) -> None:
    rng = random.Random(SEED)
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))) for _ in range(20)]
    blobs += [b"GET / HTTP/1.1\r\n" + b"x-h: " + b"a" * 200_000 + b"\r\n\r\n",
              b"GET /health HTTP/1.1\r\nhost: x\r\n" + b"x: y\r\n" * 5000 + b"\r\n",
              b"POST /v1/commands HTTP/1.1\r\nhost: x\r\ncontent-length: 99999999999999999999\r\n\r\n{}",
              b"POST /v1/commands HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
              b"GET /health HTTP/9.9\r\n\r\n", b"\r\n\r\n", b"GET " + b"/a" * 50_000 + b" HTTP/1.1\r\nhost: x\r\n\r\n"]
    with serve_in_thread(ledger) as url:
        host, _, port = url.removeprefix("http://").rpartition(":")
        for blob in blobs:
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                try:
                    sock.sendall(blob)
                    with contextlib.suppress(OSError):  # the server hung up first: its answer is still to be read
                        sock.shutdown(socket.SHUT_WR)
                    answer = b"".join(iter(lambda: sock.recv(65536), b""))
                except (ConnectionResetError, BrokenPipeError):
                    answer = b""  # refusing to talk is fine; answering 5xx is not
            status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/") else b""
            assert not status.startswith(b"5"), (blob[:80], answer[:200])
        assert fuzz.health(fuzz.http_sender(host, int(port)))


def test_the_judge_counts_5xx_crashes_and_bad_error_shapes(fuzz: ModuleType) -> None:
    answers = iter([
        (500, {"content-type": "application/json"}, b'{"error":{"code":"storage_failure","message":"x"}}'),
        (400, {"content-type": "application/json"}, b'{"detail":"nope"}'),
        (409, {"content-type": "application/json"}, b'{"error":{"code":"invalid_command","message":"x"}}'),
        (200, {"content-type": "application/json"}, b"{}"),
    ])

    def send(request: object) -> tuple[int, dict[str, str], bytes]:
        answer = next(answers, None)
        if answer is None:
            raise RuntimeError("boom")
        return answer

    tally = fuzz.run_campaign(send, count=6, seed_value=SEED)
    assert tally.tried == 6
    assert tally.server_errors == 1
    assert tally.crashes == 2
    joined = "\n".join(tally.findings)
    assert "without the wire shape" in joined and "whose status is 400" in joined and "boom" in joined


def test_the_same_seed_draws_the_same_requests(fuzz: ModuleType) -> None:
    def drawn(seed_value: int) -> list[bytes]:
        seen: list[bytes] = []

        def send(request: object) -> tuple[int, dict[str, str], bytes]:
            seen.append(repr(request).encode())
            return 404, {}, b""

        fuzz.run_campaign(send, count=30, seed_value=seed_value)
        return seen

    assert drawn(5) == drawn(5)
    assert drawn(5) != drawn(6)


def test_fuzz_script_prints_its_figures_and_seed() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--requests", "60", "--seed", "3"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "seed=3" in result.stdout and "replay: python scripts/fuzz.py --requests 60 --seed 3" in result.stdout
    assert "requests tried: 60  5xx answers: 0  crashes: 0" in result.stdout


@pytest.mark.parametrize("argv", [["--requests", "0"], ["--seed", "-1"], ["--requests", "many"]])
def test_fuzz_script_refuses_bad_input_in_one_line(argv: list[str]) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), *argv],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") <= 1, result.stderr


def test_error_bodies_from_the_fuzzer_parse_as_json(ledger: ReferenceLedger) -> None:
    # A body with a lone surrogate escape must be refused, not stored and re-emitted as invalid UTF-8.
    response = ledger.handle("POST", "/v1/commands", {"content-type": "application/json"}, b'{"a":"\\ud800"}')
    assert response.status == 400
    json.loads(response.body)


@pytest.mark.slow
def test_long_fuzz_campaign(ledger: ReferenceLedger, fuzz: ModuleType) -> None:
    tally = fuzz.run_campaign(fuzz.in_process_sender(ledger), count=5000, seed_value=SEED + 2)
    assert (tally.server_errors, tally.crashes, tally.findings) == (0, 0, [])


def test_test_clock_refuses_advances_past_the_storable_range(tmp_path: Path, fuzz: ModuleType) -> None:
    from aidememo_ref import OffsetClock

    ledger = ReferenceLedger(tmp_path / "clock.sqlite", clock=OffsetClock(), test_clock=True)
    fuzz.provision_all(ledger)
    send = fuzz.in_process_sender(ledger)
    fuzz.populate(send)
    json_type = (b"content-type", b"application/json")
    leap = ledger.handle("POST", "/__test__/clock", [json_type], b'{"advance_ms": 9223372036854775807}')
    token = (b"authorization", f"Bearer {fuzz.ACTORS['receiver'][0]}".encode())
    body = b'{"command_id":"late","expected_revision":1,"payload":{"claim_id":"k"}}'
    try:
        status = ledger.handle("POST", f"/v1/projects/{fuzz.PROJECT}/handoffs/h-1/accept", [json_type, token], body).status
    except OverflowError:
        status = 500
    assert leap.status == 400 and status < 500


def test_reference_keeps_serving_beside_slow_and_stalled_clients(ledger: ReferenceLedger, fuzz: ModuleType) -> None:
    # Slow clients hold connections half-sent (headers, or a body short of its length); the
    # server must still answer everyone else. The deadline is the socket timeout, not a figure.
    with serve_in_thread(ledger) as url:
        host, _, port = url.removeprefix("http://").rpartition(":")
        stalled = []
        try:
            for i in range(60):
                sock = socket.create_connection((host, int(port)), timeout=10)
                if i % 2:
                    sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nx-slow: ")
                else:
                    sock.sendall(b"POST /v1/commands HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                                 b"content-length: 1000000\r\n\r\n{\"command_id\":")
                stalled.append(sock)
            send = fuzz.http_sender(host, int(port), timeout_s=10)
            assert fuzz.health(send)
            tally = fuzz.run_campaign(send, count=30, seed_value=SEED + 3)
            assert (tally.server_errors, tally.crashes, tally.findings) == (0, 0, [])
        finally:
            for sock in stalled:
                sock.close()
