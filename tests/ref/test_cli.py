"""``aidememo-ref bootstrap`` and ``serve`` as users run them, and the crash campaign."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from aidememo_ref import OffsetClock, ReferenceLedger
from refkit.clock import HOLD_LAPSES_MS
from refkit.process import ReferenceProcess, ServerStartError
from tests.checkout import secret_file

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from aidememo_cli import main; raise SystemExit(main())"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def bootstrap(db: Path, tf: Path, *extra: str, actor: str = "codex-p1") -> subprocess.CompletedProcess[str]:
    return run("bootstrap", "--database", str(db), "--tenant-id", "acme", "--project-id", "memory",
               "--actor-id", actor, "--token-file", str(tf), *extra)


def test_bootstrap_rules(tmp_path: Path) -> None:
    db = tmp_path / "ssot.sqlite"
    tf = secret_file(tmp_path, "w.token", "w" * 64)
    first = bootstrap(db, tf, "--project-epoch", "EPOCH1")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "bootstrapped tenant=acme project=memory actor=codex-p1 epoch=EPOCH1\n"
    assert bootstrap(db, tf, "--project-epoch", "EPOCH1").stdout == first.stdout  # idempotent
    assert bootstrap(db, tf).stdout == first.stdout  # the existing epoch is kept
    for extra, word in ((["--project-epoch", "EPOCH2"], "epoch"), (["--role", "reader"], "membership"),
                        (["--actor-kind", "human"], "actor")):
        refused = bootstrap(db, tf, *extra)
        assert refused.returncode == 1 and word in refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    other = bootstrap(db, tf, actor="codex-p2")
    assert other.returncode == 1 and "token binding conflicts" in other.stderr
    second = bootstrap(db, secret_file(tmp_path, "p2.token", "p" * 64), actor="codex-p2")
    assert second.returncode == 0 and "epoch=EPOCH1" in second.stdout


@pytest.mark.parametrize(
    ("token", "mode", "extra", "needle"),
    [("t" * 32, 0o644, [], "chmod 600"), ("two words", 0o600, [], "whitespace"), ("", 0o600, [], "empty"),
     ("t" * 32, 0o600, ["--actor-id", "bad actor"], "invalid actor_id"), ("t" * 32, 0o600, ["--role", "god"], "role")],
)
def test_bootstrap_refusals_are_one_line(tmp_path: Path, token: str, mode: int, extra: list[str], needle: str) -> None:
    tf = secret_file(tmp_path, "t.token", token, mode)
    args = ["bootstrap", "--database", str(tmp_path / "db.sqlite"), "--tenant-id", "acme", "--project-id", "memory",
            "--actor-id", "a", "--token-file", str(tf), *extra]
    result = run(*args)
    assert result.returncode != 0
    assert needle in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_missing_token_file_is_one_line(tmp_path: Path) -> None:
    result = bootstrap(tmp_path / "db.sqlite", tmp_path / "absent.token")
    assert result.returncode == 1 and result.stderr.startswith("error: cannot read token file")


def test_a_file_that_is_no_database_is_named_so(tmp_path: Path) -> None:
    junk = tmp_path / "notes.sqlite"
    junk.write_text("not a database, only words\n" * 100)
    for args in (["serve", "--database", str(junk), "--bind", "127.0.0.1:0"],
                 ["bootstrap", "--database", str(junk), "--tenant-id", "acme", "--project-id", "memory",
                  "--actor-id", "a", "--token-file", str(secret_file(tmp_path, "t.token", "t" * 32))]):
        result = run(*args)
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "file is not a database" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_is_ready_when_health_answers_and_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "ssot.sqlite"
    tf = secret_file(tmp_path, "w.token", "serve-token-0123456789")
    assert bootstrap(db, tf).returncode == 0
    server = ReferenceProcess.start(db)  # returns once the URL line is printed and /health answers
    try:
        ident = httpx.get(f"{server.url}/v1/projects/memory/identity", timeout=5,
                          headers={"Authorization": "Bearer serve-token-0123456789"})
        assert ident.json()["actor_id"] == "codex-p1"
    finally:
        code = server.stop(sig)
    assert code == 0


def test_a_server_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match="database directory does not exist"):
        ReferenceProcess.start(tmp_path / "missing" / "db.sqlite")


def test_serve_refusals(tmp_path: Path) -> None:
    for args, needle in ((["--bind", "0.0.0.0:3030"], "allow-insecure-http"), (["--bind", "localhost:3030"], "IP literal"),
                         (["--bind", "127.0.0.1"], "IP:PORT")):
        result = run("serve", "--database", str(tmp_path / "db.sqlite"), *args)
        assert result.returncode == 1 and needle in result.stderr and "Traceback" not in result.stderr


def test_test_clock_is_served_only_when_asked(tmp_path: Path) -> None:
    plain = ReferenceLedger(tmp_path / "a.sqlite")
    assert plain.handle("GET", "/__test__/clock").status == 404
    ledger = ReferenceLedger(tmp_path / "b.sqlite", clock=OffsetClock(), test_clock=True)
    before = ledger.handle("GET", "/__test__/clock").json()["now_ms"]
    moved = ledger.handle("POST", "/__test__/clock", {"content-type": "application/json"}, b'{"advance_ms": 120000}')
    assert moved.json()["now_ms"] >= before + 120_000
    assert ledger.handle("POST", "/__test__/clock", {"content-type": "application/json"}, b'{"advance_ms": -1}').status == 400


def test_a_held_test_clock_stands_still_until_the_next_move(tmp_path: Path) -> None:
    # AM-HL-HB-4's check decides a heartbeat at exactly a lease's expiry by holding the clock.
    ledger = ReferenceLedger(tmp_path / "c.sqlite", clock=OffsetClock(), test_clock=True)
    json_type = {"content-type": "application/json"}

    def move(body: bytes) -> int:
        answer = ledger.handle("POST", "/__test__/clock", json_type, body)
        assert answer.status == 200, answer.body
        now: int = answer.json()["now_ms"]
        return now

    held = move(b'{"advance_ms": 0, "hold": true}')
    time.sleep(0.02)
    assert ledger.handle("GET", "/__test__/clock").json()["now_ms"] == held
    assert move(b'{"advance_ms": 120000, "hold": true}') == held + 120_000
    time.sleep(0.02)
    assert ledger.handle("GET", "/__test__/clock").json()["now_ms"] == held + 120_000
    released = move(b'{"advance_ms": 0}')
    time.sleep(0.02)
    assert ledger.handle("GET", "/__test__/clock").json()["now_ms"] > released >= held + 120_000
    for bad in (b'{"advance_ms": 0, "hold": 1}', b'{"hold": true}', b'{"advance_ms": 0, "hold": true, "x": 1}'):
        assert ledger.handle("POST", "/__test__/clock", json_type, bad).status == 400, bad


def test_a_hold_lapses_and_the_clock_runs_on_from_its_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    wall = [1_000_000]
    monkeypatch.setattr(OffsetClock, "_wall", staticmethod(lambda: wall[0]))
    clock = OffsetClock()
    clock.advance(500)
    clock.hold(True)
    wall[0] += HOLD_LAPSES_MS - 1
    assert clock.now_ms() == 1_000_500
    wall[0] += 1 + 250  # lapsed 250 ms ago: never back, and on from the held reading
    assert clock.now_ms() == 1_000_750


def test_crash_campaign_short_run_finds_no_loss() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "crash_campaign.py"), "--kills", "3",
                             "--writers", "3", "--seed", "11", "--max-uptime", "0.4"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "losses: 0" in result.stdout and "kills survived: 3" in result.stdout


def test_crash_verification_detects_a_lost_receipt(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import crash_campaign as campaign
    finally:
        sys.path.pop(0)
    from aidememo_ref import provision

    db = tmp_path / "v.sqlite"
    for actor, token in campaign.TOKENS.items():
        provision(db, tenant_id="t", project_id="p", actor_id=actor, token=token, project_epoch="e")
    with ReferenceProcess.start(db) as server:
        book = campaign.Ledger()
        body = {"command_id": "never-committed", "project_id": "p", "expected_revision": None,
                "operation": "resource.put", "payload": {}, "resource": {"kind": "custom.x", "id": "x"},
                "change": "upsert"}
        fake = (b'{"command_id":"never-committed","fingerprint":"00","tenant_id":"t","project_id":"p",'
                b'"actor_id":"sender","project_seq":7,"resource":{"kind":"custom.x","id":"x"},'
                b'"revision":1,"committed_at_ms":1}')
        book.record("/v1/commands", body, fake)
        answered, losses = campaign.verify(server.url, book)
    assert answered == 1
    assert any("drifted or lost" in loss for loss in losses)
    assert any("not in the feed" in loss for loss in losses)
