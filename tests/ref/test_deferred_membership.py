"""A write's membership is checked inside its own transaction (SQLite), and still answers exactly
what a check before it would: a change committed by another connection between two writes of one
caller applies to the second, with the same code and the same precedence over later checks."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing

import pytest

from .conftest import World, error_of
from .test_routes import raw


def _other_connection(world: World, sql: str) -> None:
    assert world.ledger.database is not None
    other = sqlite3.connect(world.ledger.database)
    other.execute(sql)
    other.commit()
    other.close()


def _seqs(world: World) -> int:
    assert world.ledger.database is not None
    with closing(sqlite3.connect(world.ledger.database)) as conn:
        return int(conn.execute("SELECT count(*) FROM log").fetchone()[0])


def _write(world: World, cid: str, **kw: object) -> tuple[int, str] | int:
    r = world.call("codex-p1", "POST", "/v1/commands", raw(cid, **kw))  # type: ignore[arg-type]
    return r.status_code if r.status_code == 200 else error_of(r)


SUSPEND = "UPDATE memberships SET status='suspended' WHERE actor_id='codex-p1'"
REVOKE = "UPDATE token_bindings SET active=0 WHERE actor_id='codex-p1'"
DEMOTE = "UPDATE memberships SET role='reader' WHERE actor_id='codex-p1'"


@pytest.mark.parametrize(("change", "expected"), [
    (SUSPEND, (403, "project_unauthorized")),
    (REVOKE, (401, "authentication_failed")),
    (DEMOTE, (403, "project_unauthorized")),
])
def test_another_connections_change_applies_to_the_next_write(sqlite_world: World, change: str,
                                                              expected: tuple[int, str]) -> None:
    world = sqlite_world
    assert _write(world, "c1") == 200  # the membership is now remembered by this connection
    _other_connection(world, change)
    assert _write(world, "c2", rid="n2") == expected
    assert _seqs(world) == 1  # nothing written by the refused command


@pytest.mark.parametrize(("change", "expected"), [
    (SUSPEND, (403, "project_unauthorized")),
    (REVOKE, (401, "authentication_failed")),
])
def test_a_changed_membership_wins_over_the_raw_route_rules(sqlite_world: World, change: str,
                                                            expected: tuple[int, str]) -> None:
    """§2.2: membership (401/403) is checked before the raw-route rules (400): a command that
    breaks both, sent with a remembered membership that is no longer current, gets the 401/403."""
    world = sqlite_world
    assert _write(world, "c1") == 200
    assert _write(world, "bad0", kind="session") == (400, "invalid_command")
    _other_connection(world, change)
    assert _write(world, "bad1", kind="session") == expected


def test_a_demoted_writer_still_gets_the_raw_route_error_first(sqlite_world: World) -> None:
    """A reader's raw command that breaks the raw-route rules is a 400 (they come before the role check)."""
    world = sqlite_world
    assert _write(world, "c1") == 200
    _other_connection(world, DEMOTE)
    assert _write(world, "bad", kind="session") == (400, "invalid_command")
    assert _write(world, "c2", rid="n2") == (403, "project_unauthorized")


def test_an_unrelated_commit_elsewhere_does_not_refuse_or_double_a_write(sqlite_world: World) -> None:
    world = sqlite_world
    assert _write(world, "c1") == 200
    r = world.call("codex-p2", "POST", "/v1/commands", raw("p2", rid="other"))
    assert r.status_code == 200
    _other_connection(world, "UPDATE tenants SET display_name='renamed'")  # moves data_version only
    assert _write(world, "c2", rid="n2") == 200
    assert _seqs(world) == 3


@pytest.mark.parametrize("route", ["typed", "transition"])
def test_typed_routes_check_the_membership_in_their_transaction(sqlite_world: World, route: str) -> None:
    world = sqlite_world
    world.session()
    world.send("h1")
    world.fact("f0")  # the receiver's membership is remembered too
    call: Callable[[], int] = (
        (lambda: world.call("codex-p1", "POST", world.p("/sessions"), {
            "command_id": "cs2", "payload": {"session_id": "s2", "source_id": None, "topic": "T"}}).status_code)
        if route == "typed" else
        (lambda: world.transition("h1", "accept", 1, {"claim_id": "claim1"}, "acc1", actor="codex-p2").status_code))
    _other_connection(world, "UPDATE memberships SET status='suspended'")
    assert call() == 403
    assert _seqs(world) == 3


def test_a_promoted_reader_writes_on_its_next_request(sqlite_world: World) -> None:
    """The role refusal answered from a remembered membership is not remembered itself."""
    world = sqlite_world
    r = world.call("reader_actor", "POST", "/v1/commands", raw("r1"))
    assert error_of(r) == (403, "project_unauthorized")
    _other_connection(world, "UPDATE memberships SET role='writer' WHERE actor_id='reader_actor'")
    assert world.call("reader_actor", "POST", "/v1/commands", raw("r2")).status_code == 200
    assert _seqs(world) == 1


def test_only_authorization_values_that_proved_a_membership_are_remembered(sqlite_world: World) -> None:
    world = sqlite_world
    for n in range(3):
        r = world.call(None, "POST", "/v1/commands", raw(f"g{n}"), headers={"Authorization": f"Bearer guess-{n:020d}"})
        assert error_of(r) == (401, "authentication_failed")
    assert _write(world, "c1") == 200
    assert list(world.ledger.service._digests) == [b"Bearer writer-token-0123456789"]


# -- reads: the membership is checked by the read itself (the statement that catches memory up) ----
READS = {
    "resource": "/resources/session/session_remote",
    "status": "/handoffs/h1",
    "snapshot": "/snapshot",
    "changes": "/changes?project_epoch={epoch}&after_seq=0",
    "materialized": "/changes/materialized?project_epoch={epoch}&after_seq=0",
    "mailbox": "/handoffs?box=outbox",
    "search": "/search?q=done",
}
ELSEWHERE = {  # (SQLite, PostgreSQL) statements another connection commits
    "suspend": ("UPDATE memberships SET status='suspended' WHERE actor_id='codex-p1'",
                "UPDATE ssot_memberships SET status='suspended' WHERE actor_id='codex-p1'"),
    "revoke": ("UPDATE token_bindings SET active=0 WHERE actor_id='codex-p1'",
               "UPDATE ssot_token_bindings SET active=FALSE WHERE actor_id='codex-p1'"),
}
REFUSED = {"suspend": (403, "project_unauthorized"), "revoke": (401, "authentication_failed")}


def _elsewhere(world: World, change: str) -> None:
    sqlite_sql, postgres_sql = ELSEWHERE[change]
    if world.postgres_url is None:
        _other_connection(world, sqlite_sql)
        return
    import psycopg

    with psycopg.connect(world.postgres_url, autocommit=True) as conn:
        conn.execute(postgres_sql)


def _read(world: World, path: str) -> tuple[int, str] | int:
    r = world.call("codex-p1", "GET", world.p(path))
    return r.status_code if r.status_code == 200 else error_of(r)


def _epoch(world: World) -> str:
    return str(world.call("codex-p2", "GET", world.p("/snapshot")).json()["project_epoch"])


@pytest.mark.parametrize("change", sorted(ELSEWHERE))
@pytest.mark.parametrize("route", sorted(READS))
def test_another_connections_change_applies_to_the_next_read(world: World, route: str, change: str) -> None:
    """A read answers from the membership the connection remembers and checks it in the same
    statement that catches its memory up with the database: a suspension or revocation committed
    by another connection applies to the very next read, on every read route."""
    world.session()
    world.send("h1")
    world.fact("f0")
    path = READS[route].format(epoch=_epoch(world))
    assert _read(world, path) == 200  # the membership is now remembered
    _elsewhere(world, change)
    assert _read(world, path) == REFUSED[change]  # the next request after the change, this one


@pytest.mark.parametrize(("route", "path", "later"), [
    ("resource", "/resources/session/absent", (404, "resource_not_found")),
    ("status", "/handoffs/absent", (404, "resource_not_found")),
    ("changes", "/changes?project_epoch={epoch}&after_seq=0&limit=0", (400, "invalid_change_batch")),
    ("changes", "/changes?project_epoch=other&after_seq=0", (409, "cursor_epoch_mismatch")),
])
def test_a_changed_membership_wins_over_a_reads_later_errors(world: World, route: str, path: str,
                                                             later: tuple[int, str]) -> None:
    """§2.2: 401 and 403 come before the errors a read finds after authenticating, even when the
    membership was answered from memory."""
    world.session()
    world.send("h1")
    path = path.format(epoch=_epoch(world))
    assert _read(world, path) == later
    _elsewhere(world, "revoke")
    assert _read(world, path) == (401, "authentication_failed")


def test_routed_paths_are_remembered_within_bounds(world: World) -> None:
    """The route of a path is remembered, so asking again answers the same; a path longer than
    any valid one is answered the same way but not remembered."""
    world.session()
    short = world.p("/resources/session/session_remote")
    long = world.p("/resources/session/" + "x" * 600)
    for _ in range(2):
        assert world.call("codex-p1", "GET", short).status_code == 200
        assert error_of(world.call("codex-p1", "GET", long))[0] == 400
    routed = world.ledger.service._routed
    assert short.encode() in routed and long.encode() not in routed
