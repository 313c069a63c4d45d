"""``aidememo-ref bootstrap``'s import graph, and its light path writing what the whole store writes.

The conformance suite runs the target's bootstrap once per identity it provisions, so bootstrap
must start like a local command (``bench/suite.py`` times it against ``python -c pass``). These
tests pin what it loads, never a time: on a file at the current layout it loads the rules of
bootstrap and SQLite, nothing of the ledger's memory, the service or an HTTP stack. When one
fails, ``python -X importtime -m aidememo_ref bootstrap ...`` shows who imported the module.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from aidememo_ref import provision
from aidememo_ref._provision import ROLES, ProvisionError, check, insert_identity, provision_current
from aidememo_wire.status import Role
from tests.startup_probe import BARE, COMMAND, KIT

# What bootstrap on a current file may load of the kit: the dispatcher, the verb, its rules.
_ALLOWED = {"aidememo_cli", "aidememo_ref", "aidememo_ref.verbs", "aidememo_ref._verbs", "aidememo_ref._verbs._backend",
            "aidememo_ref._verbs.bootstrap", "aidememo_ref._errors", "aidememo_ref._provision", "aidememo_wire",
            "aidememo_wire.ids", "refkit", "refkit.args", "refkit.clock", "refkit.errors",
            "refkit.records", "refkit.sqlitefile", "refkit.ulid"}
# Heavy modules bootstrap never needs: the HTTP stack, PostgreSQL, and dataclasses (with
# inspect), whose definitions were a large part of loading the ledger; signal (3M instructions),
# and OpenSSL's hashlib (11M) where CPython has its own SHA-256 to hash the token with.
_OWN_SHA256 = any(importlib.util.find_spec(name) is not None for name in ("_sha2", "_sha256"))
_NEVER = ("httpx", "uvicorn", "psycopg", "psycopg_pool", "jsonschema", "asyncio", "ssl", "dataclasses", "inspect",
          "email", "decimal", "json", "signal", *(("_hashlib",) if _OWN_SHA256 else ()))


def _modules(tmp_path: Path, program: str, argv: list[str]) -> tuple[int, set[str]]:
    listing = tmp_path / "modules.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "HERMES_"))}
    done = subprocess.run([sys.executable, "-c", program, str(listing), *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, set(listing.read_text().split()) if listing.exists() else set()


def _check(modules: set[str]) -> None:
    kit = sorted(m for m in modules if m.split(".")[0] in KIT and m not in _ALLOWED)
    assert not kit, f"bootstrap loaded modules beyond its own rules: {kit}"
    heavy = sorted(m for m in modules if m.split(".")[0] in _NEVER or m in _NEVER)
    assert not heavy, f"bootstrap loaded modules it does not need: {heavy}"


def _token(tmp_path: Path, name: str, value: str) -> Path:
    path = tmp_path / name
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


def _bootstrap(tmp_path: Path, database: Path, project: str, actor: str, token: Path, *extra: str) -> list[str]:
    return ["bootstrap", "--database", str(database), "--tenant-id", "t", "--project-id", project,
            "--actor-id", actor, "--token-file", str(token), *extra]


def test_bootstrap_on_a_current_file_loads_only_its_rules(tmp_path: Path) -> None:
    database = tmp_path / "ledger.sqlite"
    provision(database, tenant_id="t", project_id="p", actor_id="first", token="tok-first")
    code, modules = _modules(tmp_path, COMMAND, _bootstrap(tmp_path, database, "p", "second",
                                                          _token(tmp_path, "second.token", "tok-second")))
    assert code == 0
    _, bare = _modules(tmp_path, BARE, [])
    assert "aidememo_ref._provision" in modules  # the probe saw the command run
    _check(modules - bare)
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT role FROM memberships WHERE actor_id='second'").fetchall() == [("writer",)]


def test_bootstrap_on_a_new_file_goes_the_whole_way_and_creates_the_ledger(tmp_path: Path) -> None:
    database = tmp_path / "new.sqlite"
    code, modules = _modules(tmp_path, COMMAND, _bootstrap(tmp_path, database, "p", "a",
                                                          _token(tmp_path, "a.token", "tok-a")))
    assert code == 0
    assert "aidememo_ref._sqlite" in modules
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert conn.execute("SELECT count(*) FROM log").fetchone()[0] == 0


def test_a_conflicting_rerun_is_refused_in_one_line_on_the_light_path(tmp_path: Path) -> None:
    database = tmp_path / "ledger.sqlite"
    provision(database, tenant_id="t", project_id="p", actor_id="a", token="tok-a", role="reader")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIDEMEMO_")}
    done = subprocess.run([sys.executable, "-m", "aidememo_ref", *_bootstrap(
        tmp_path, database, "p", "a", _token(tmp_path, "b.token", "tok-b"), "--role", "writer")],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip() == "error: membership conflict: actor a is a reader of p, not a writer"
    assert "Traceback" not in done.stderr


def _identity_rows(database: Path) -> list[tuple[object, ...]]:
    """Every identity row, without the times and the minted epoch (they differ between runs)."""
    with sqlite3.connect(database) as conn:
        return [*conn.execute("SELECT tenant_id, display_name, status FROM tenants"),
                *conn.execute("SELECT tenant_id, project_id, display_name, status FROM projects"),
                *conn.execute("SELECT tenant_id, actor_id, display_name, kind, status FROM actors"),
                *conn.execute("SELECT * FROM memberships ORDER BY actor_id"),
                *conn.execute("SELECT token_sha256, tenant_id, actor_id, active FROM token_bindings ORDER BY actor_id")]


def test_the_light_path_writes_what_the_whole_store_writes(tmp_path: Path) -> None:
    light, whole = tmp_path / "light.sqlite", tmp_path / "whole.sqlite"
    identities = [dict(tenant_id="t", project_id="p", actor_id="a", token="tok-a", role="owner", actor_kind="human",
                       actor_name="Ann"),
                  dict(tenant_id="t", project_id="p", actor_id="b", token="tok-b", role="reader")]
    for database in (light, whole):
        provision(database, tenant_id="t", project_id="seed", actor_id="s", token="tok-s")  # creates the file
    for fields in identities:
        assert provision_current(light, fields, 1_700_000_000_000, 5_000) is not None  # type: ignore[arg-type]
        from aidememo_ref._sqlite import SQLiteStore  # the whole store, as the server opens it

        store = SQLiteStore(whole)
        try:
            store.provision(**check(fields, 1_700_000_000_000)._asdict())  # type: ignore[arg-type]
        finally:
            store.close()
    assert _identity_rows(light) == _identity_rows(whole)


def test_the_light_path_declines_a_file_at_another_layout(tmp_path: Path) -> None:
    database = tmp_path / "old.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA user_version=3")
    fields = dict(tenant_id="t", project_id="p", actor_id="a", token="tok-a")
    assert provision_current(database, fields, 1, 5_000) is None  # type: ignore[arg-type]
    assert provision_current(tmp_path / "missing.sqlite", fields, 1, 5_000) is None  # type: ignore[arg-type]


def test_the_identity_statements_refuse_a_token_bound_elsewhere(tmp_path: Path) -> None:
    database = tmp_path / "ledger.sqlite"
    provision(database, tenant_id="t", project_id="p", actor_id="a", token="tok-shared")
    conn = sqlite3.connect(database)
    try:
        with pytest.raises(ProvisionError, match="already bound to another actor"):
            insert_identity(conn, check({"tenant_id": "t", "project_id": "p", "actor_id": "b", "token": "tok-shared"}, 1))
    finally:
        conn.close()


def test_the_roles_bootstrap_takes_are_the_wires():
    assert ROLES == tuple(role.value for role in Role)
