"""``aidememo-ref xmemo bootstrap|serve`` as users run them, and nothing lost on kill -9."""

from __future__ import annotations

import io
import signal
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import httpx
import pytest

from refkit.process import ReferenceProcess
from tests.checkout import secret_file

KEY = "xm-cli-key-0123456789abcdefgh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``aidememo-ref xmemo ARGS`` in this process (the command line is a function; serve runs as a process)."""
    from aidememo_cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["xmemo", *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(["aidememo-ref", "xmemo", *args], code, out.getvalue(), err.getvalue())


def bootstrap(db: Path, kf: Path, *extra: str, owner: str = "acme") -> subprocess.CompletedProcess[str]:
    return run("bootstrap", "--database", str(db), "--owner-id", owner, "--key-file", str(kf), *extra)


def one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode != 0, result.stdout
    assert needle in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_bootstrap_binds_once_and_refuses_a_conflicting_rerun(tmp_path: Path) -> None:
    db, kf = tmp_path / "x.sqlite", secret_file(tmp_path, "k", KEY)
    first = bootstrap(db, kf, "--agent-id", "claude", "--project-id", "memory-os")
    assert first.returncode == 0, first.stderr
    assert first.stdout == ("bootstrapped owner=acme organization=org-acme workspace=ws-acme project=memory-os "
                            "agent=claude scopes=memory:read,memory:write\n")
    again = bootstrap(db, kf, "--agent-id", "claude", "--project-id", "memory-os")
    assert again.returncode == 0 and again.stdout == "already " + first.stdout
    for extra in (["--agent-id", "codex", "--project-id", "memory-os"], ["--agent-id", "claude"],
                  ["--agent-id", "claude", "--project-id", "memory-os", "--scopes", "memory:read"]):
        one_line_error(bootstrap(db, kf, *extra), "key binding conflict")
    one_line_error(bootstrap(db, kf, owner="globex"), "key binding conflict")
    assert KEY not in first.stdout + first.stderr
    reader = bootstrap(db, secret_file(tmp_path, "r", "r" * 32), "--scopes", "memory:read", "--organization-id", "o",
                       "--workspace-id", "w")
    assert reader.stdout == ("bootstrapped owner=acme organization=o workspace=w project=acme agent=- "
                             "scopes=memory:read\n")


@pytest.mark.parametrize(("key", "mode", "extra", "needle"), [
    (KEY, 0o644, [], "chmod 600"),
    ("short-key", 0o600, [], "at least 24 characters"),
    ("a key with spaces in it 0123", 0o600, [], "visible ASCII"),
    (KEY, 0o600, ["--scopes", "memory:admin"], "unknown scope memory:admin"),
    (KEY, 0o600, ["--scopes", ","], "scopes must name"),
    (KEY, 0o600, ["--owner-id", "bad owner"], "invalid owner id"),
    (KEY, 0o600, ["--project-id", "a.b"], "invalid project id"),
    (KEY, 0o600, ["--agent-id", "bad agent"], "invalid agent id"),
])
def test_bootstrap_refusals_are_one_line(tmp_path: Path, key: str, mode: int, extra: list[str], needle: str) -> None:
    kf = secret_file(tmp_path, "k", key, mode)
    args = ["bootstrap", "--database", str(tmp_path / "x.sqlite"), "--owner-id", "acme", "--key-file", str(kf)]
    one_line_error(run(*args, *extra), needle)


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_text("this is not an SQLite database, not even close" * 4)
    one_line_error(bootstrap(bad, secret_file(tmp_path, "k", KEY)), "file is not a database")
    one_line_error(run("serve", "--database", str(bad), "--bind", "127.0.0.1:0"), "file is not a database")


def test_missing_key_file_and_unknown_subcommand(tmp_path: Path) -> None:
    one_line_error(bootstrap(tmp_path / "x.sqlite", tmp_path / "absent"), "cannot read key file")
    open_to_all = secret_file(tmp_path, "open", KEY, 0o644)
    one_line_error(bootstrap(tmp_path / "x.sqlite", open_to_all), f"key file {open_to_all} must not be readable")
    one_line_error(run("frobnicate"), "unknown command")
    assert run().returncode == 2


def serving(db: Path) -> ReferenceProcess:
    return ReferenceProcess.start(db, command=("xmemo", "serve"))


def test_serve_is_ready_when_health_answers_and_stops_cleanly(tmp_path: Path) -> None:
    # SIGINT takes the same path (the AideMemo serve tests cover both signals on the shared server class)
    db = tmp_path / "x.sqlite"
    assert bootstrap(db, secret_file(tmp_path, "k", KEY)).returncode == 0
    server = serving(db)
    health = httpx.get(f"{server.url}/health", timeout=5)
    assert health.json()["status"] == "ok" and health.headers["x-xmemo-audit-id"]
    validate = httpx.get(f"{server.url}/v1/auth/token/validate", headers={"X-API-Key": KEY}, timeout=5)
    assert validate.json()["status"] == "valid"
    assert server.stop(signal.SIGTERM) == 0


def test_an_answered_write_survives_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    assert bootstrap(db, secret_file(tmp_path, "k", KEY), "--agent-id", "claude").returncode == 0
    headers = {"Authorization": f"Bearer {KEY}"}
    server = serving(db)
    written = [httpx.post(f"{server.url}/v1/remember", headers=headers, timeout=5,
                          json={"content": f"durable {i}", "path": "p"}).json()["id"] for i in range(5)]
    server.kill()
    with serving(db) as again:
        for memory_id in written:
            assert httpx.get(f"{again.url}/v1/memories/{memory_id}", headers=headers, timeout=5).status_code == 200


def test_serve_refusals(tmp_path: Path) -> None:
    for args, needle in ((["--bind", "0.0.0.0:3040"], "allow-insecure-http"), (["--bind", "localhost:1"], "IP literal"),
                         (["--database", str(tmp_path / "no" / "x.sqlite")], "does not exist")):
        one_line_error(run("serve", *(["--database", str(tmp_path / "x.sqlite")] if "--database" not in args else []),
                           *args), needle)
