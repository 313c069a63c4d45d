"""SQLite file layouts: layout 5 (one append-only log) is the store's; files of layouts 3 and 2
are upgraded in place; anything else is refused in one line, unchanged.

``fixtures/layout3.sqlite`` was written by the layout-3 release (``fixtures/make_layout3.py``),
with every kind of write (session, facts, handoff contexts, handoffs through accept and return,
raw puts and a delete), and ``fixtures/layout3.json`` holds what that release answered. A layout-2
file is the same tables without layout 3's two triggers.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from aidememo_ref import ReferenceLedger
from aidememo_ref._sqlite import LAYOUT_VERSION
from aidememo_ref._store import StoreError

from .fixtures import make_layout3 as fixture

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOKEN = "l" * 48
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]
CLI = [sys.executable, "-c", "from aidememo_cli import main; raise SystemExit(main())"]
OLD_TABLES = {"changes", "resources", "handoff_index", "search_docs", "search_terms"}


def layout(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    finally:
        conn.close()


def old_file(tmp_path: Path, version: int) -> Path:
    db = tmp_path / f"layout{version}.sqlite"
    shutil.copyfile(FIXTURES / "layout3.sqlite", db)
    assert layout(db) == 3
    if version == 2:
        conn = sqlite3.connect(db)
        triggers = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
        assert len(triggers) == 2, triggers
        for name in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("PRAGMA user_version=2")
        conn.commit()
        conn.close()
    return db


def handle(ledger: ReferenceLedger, actor: str, method: str, path: str, body: object = None) -> tuple[int, str]:
    response = ledger.handle(method, path, fixture.headers(actor), b"" if body is None else json.dumps(body).encode())
    return response.status, response.body.decode()


@pytest.mark.parametrize("version", [3, 2])
def test_an_old_file_is_upgraded_and_answers_exactly_as_before(tmp_path: Path, version: int) -> None:
    db = old_file(tmp_path, version)
    recorded = json.loads((FIXTURES / "layout3.json").read_text())
    ledger = ReferenceLedger(db)
    assert layout(db) == LAYOUT_VERSION
    assert not tables(db) & OLD_TABLES and "log" in tables(db)
    # Every command replays its receipt byte for byte; every read answers what layout 3 answered.
    assert [handle(ledger, actor, method, path, body) for actor, method, path, body in fixture.commands()] == [
        (200, receipt) for receipt in recorded["receipts"]]
    assert [handle(ledger, actor, "GET", path) for actor, path in fixture.reads()] == [
        (200, answer) for answer in recorded["reads"]]
    # A changed retry is still a conflict, and new writes continue the sequence and revisions.
    actor, method, path, body = fixture.commands()[-2]
    assert handle(ledger, actor, method, path, {**body, "payload": {"v": 99}})[0] == 409
    status, text = handle(ledger, "sender", "POST", "/v1/commands", {
        "command_id": "c-after", "project_id": "p", "expected_revision": 3, "operation": "resource.put",
        "payload": {"v": 3}, "resource": {"kind": "custom.note", "id": "n-1"}, "change": "upsert"})
    assert status == 200, text
    assert (json.loads(text)["project_seq"], json.loads(text)["revision"]) == (12, 4)
    status, text = handle(ledger, "receiver", "POST", "/v1/projects/p/handoffs/h-2/accept", {
        "command_id": "c-accept-2", "expected_revision": 1, "payload": {"claim_id": "claim-2"}})
    assert status == 200, text
    ledger.close()
    reopened = ReferenceLedger(db)  # the log alone rebuilds the same state
    inbox = json.loads(handle(reopened, "receiver", "GET", "/v1/projects/p/handoffs?box=inbox")[1])
    assert [(a["project_seq"], a["revision"], a["record"]["status"]) for a in inbox["assignments"]] == [
        (13, 2, "accepted")]
    found = json.loads(handle(reopened, "sender", "GET", "/v1/projects/p/search?q=fallback")[1])
    assert (found["index_seq"], [hit["fact_id"] for hit in found["results"]]) == (13, ["f-2"])
    reopened.close()


def test_an_upgrade_that_fails_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    db = old_file(tmp_path, 3)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE changes SET body='{\"not\": \"a handoff\"}' WHERE kind='handoff' AND revision=1")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"cannot be upgraded from table layout 3: "):
        ReferenceLedger(db)
    assert layout(db) == 3 and OLD_TABLES <= tables(db) and "log" not in tables(db)


@pytest.mark.parametrize("damage", [
    "UPDATE changes SET body='{\"not\": \"a fact\"}' WHERE kind='fact' AND revision=1",  # parsed for search
    "UPDATE changes SET seq=seq+1 WHERE seq=(SELECT max(seq) FROM changes)",  # a gap in the sequence
])
def test_an_upgrade_is_checked_as_an_open_would_be_before_anything_is_dropped(tmp_path: Path, damage: str) -> None:
    """What the store would refuse to open once upgraded is refused while the old tables still
    exist: the file stays a layout-3 file the old release serves."""
    db = old_file(tmp_path, 3)
    conn = sqlite3.connect(db)
    assert conn.execute(damage).rowcount >= 1
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"cannot be upgraded from table layout 3: "):
        ReferenceLedger(db)
    assert layout(db) == 3 and OLD_TABLES <= tables(db) and "log" not in tables(db)


def test_files_of_other_layouts_are_refused_unchanged(tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE changes(x)")
    conn.execute("PRAGMA user_version=4")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=rf"has table layout 4, not this reference's {LAYOUT_VERSION}; start from a "
                                         "new database file"):
        ReferenceLedger(old)
    assert layout(old) == 4

    for version in (2, 3):  # the local CLI's store also says user_version 2
        foreign = tmp_path / f"local{version}.sqlite"
        conn = sqlite3.connect(foreign)
        conn.execute("CREATE TABLE facts(id TEXT)")
        conn.execute(f"PRAGMA user_version={version}")
        conn.commit()
        conn.close()
        with pytest.raises(StoreError, match=f"is not a reference ledger file \\(user_version {version} without"):
            ReferenceLedger(foreign)
        assert layout(foreign) == version
        conn = sqlite3.connect(foreign)
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["facts"]
        conn.close()


@pytest.mark.parametrize("verb", ["bootstrap", "serve"])
def test_the_cli_refuses_another_layout_in_one_line(tmp_path: Path, verb: str) -> None:
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=4")
    conn.commit()
    conn.close()
    token = tmp_path / "t.token"
    token.write_text("t" * 48 + "\n")
    token.chmod(0o600)
    extra = (["--tenant-id", "t", "--project-id", "p", "--actor-id", "a", "--token-file", str(token)]
             if verb == "bootstrap" else [])
    done = subprocess.run([*CLI, verb, "--database", str(db), *extra], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"has table layout 4, not this reference's {LAYOUT_VERSION}; start from a new database file" in done.stderr


def put(ledger: ReferenceLedger, command_id: str, expected: int | None, value: int) -> tuple[int, dict[str, object]]:
    body = json.dumps({"command_id": command_id, "project_id": "p", "expected_revision": expected,
                       "operation": "resource.put", "payload": {"value": value},
                       "resource": {"kind": "custom.note", "id": "n1"}, "change": "upsert"}).encode()
    response = ledger.handle("POST", "/v1/commands", AUTH, body)
    return response.status, json.loads(response.body)


def test_two_stores_on_one_file_see_each_others_writes_at_their_next_transaction(tmp_path: Path) -> None:
    """Each store's memory is caught up from the log's tail when the file changed under it."""
    db = tmp_path / "shared.sqlite"
    first = ReferenceLedger(db)
    first.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    second = ReferenceLedger(db)
    assert put(first, "c1", None, 1)[0] == 200
    assert put(second, "c2", 1, 2)[1]["revision"] == 2  # second saw c1
    stale = put(first, "c3", 1, 3)  # first's memory must have caught up with c2: revision 1 is stale now
    assert (stale[0], stale[1]["error"]["code"]) == (409, "stale_revision")  # type: ignore[index]
    assert put(first, "c2", 1, 2)[1]["project_seq"] == 2  # and it replays second's receipt
    assert put(first, "c4", 2, 4)[1]["project_seq"] == 3
    feed = second.handle("GET", "/v1/projects/p/resources/custom.note/n1", AUTH, b"")
    assert json.loads(feed.body)["revision"] == 3
    first.close()
    second.close()


def test_a_memory_behind_the_file_cannot_commit(tmp_path: Path) -> None:
    """The row's rowid is the one after memory's last: a store that somehow missed a row writes
    nothing (a 500), and its next transaction catches up."""
    db = tmp_path / "guard.sqlite"
    ledger = ReferenceLedger(db)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    assert put(ledger, "c1", None, 1)[0] == 200
    store = ledger.store
    state = store._state  # type: ignore[attr-defined]
    with state.lock:  # forget c1, as a missed catch-up would
        state.applied = 0
        state.projects.clear()
    status, answer = put(ledger, "c2", None, 2)
    assert (status, answer["error"]["code"]) == (500, "storage_failure")  # type: ignore[index]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM log").fetchone()[0] == 1
    conn.close()
    assert put(ledger, "c2", 1, 2)[1]["revision"] == 2
    ledger.close()


def test_a_store_catches_up_every_index_from_another_writers_rows(tmp_path: Path) -> None:
    """A store opened before another one wrote answers every read from the rows it read back
    from the log's tail (mailbox fields, search terms from the fact bodies) exactly as the
    writer's own memory, and as layout 3 answered the same commands."""
    from aidememo_ref import ManualClock

    db = tmp_path / "two.sqlite"
    clock = ManualClock(1_767_225_600_000)
    writer = ReferenceLedger(db, clock=clock)
    for actor, token in fixture.TOKENS.items():
        writer.provision(tenant_id="t", project_id="p", actor_id=actor, token=token, project_epoch="epoch-fixture")
    reader = ReferenceLedger(db)
    assert handle(reader, "sender", "GET", "/v1/projects/p/handoffs?box=outbox")[0] == 200  # memory built, empty
    for actor, method, path, body in fixture.commands():
        clock.advance(1_000)
        assert handle(writer, actor, method, path, body)[0] == 200
    recorded = json.loads((FIXTURES / "layout3.json").read_text())["reads"]
    assert [handle(reader, actor, "GET", path) for actor, path in fixture.reads()] == [(200, r) for r in recorded]
    assert [handle(writer, actor, "GET", path) for actor, path in fixture.reads()] == [(200, r) for r in recorded]
    writer.close()
    reader.close()


def test_a_damaged_log_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "gap.sqlite"
    ledger = ReferenceLedger(db)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    assert put(ledger, "c1", None, 1)[0] == 200
    assert put(ledger, "c2", 1, 2)[0] == 200
    ledger.close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE log SET seq=3 WHERE n=2")  # a gap in the project's sequence
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"has a damaged change log: log row 2 has sequence 3 after 1$"):
        ReferenceLedger(db)


def test_a_write_committed_but_not_yet_in_memory_is_read_back_by_its_own_thread(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception between COMMIT and memory (an interrupt, memory exhausted) leaves the row in
    the file only (the request answers 500); the same connection's data_version does not move for
    its own commit, so its next statement must read the tail anyway: the write is seen and its
    retry replays its receipt."""
    from aidememo_ref._logstate import LogState

    db = tmp_path / "interrupted.sqlite"
    ledger = ReferenceLedger(db)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    assert put(ledger, "c1", None, 1)[0] == 200
    real = LogState.apply
    failures = [RuntimeError("interrupted after COMMIT")]

    def interrupted(self: LogState, row: object, content: str | None = None) -> None:
        if failures:
            raise failures.pop()
        real(self, row, content)  # type: ignore[arg-type]

    monkeypatch.setattr(LogState, "apply", interrupted)
    assert put(ledger, "c2", 1, 2)[0] == 500  # the service answers an unexpected failure as internal
    assert not failures
    resource = ledger.handle("GET", "/v1/projects/p/resources/custom.note/n1", AUTH, b"")
    assert json.loads(resource.body)["revision"] == 2
    replay = put(ledger, "c2", 1, 2)
    assert (replay[0], replay[1]["revision"], replay[1]["project_seq"]) == (200, 2, 2)
    ledger.close()


def test_a_damaged_row_from_another_writer_changes_nothing_in_memory(tmp_path: Path) -> None:
    """A row another connection appended that cannot be applied (a fact body that is not a fact)
    is refused as a storage failure with memory left as the fold of the rows before it, and once
    the row is mended the next request applies it: no half-applied project, no restart."""
    db = tmp_path / "tail.sqlite"
    ledger = ReferenceLedger(db)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    assert put(ledger, "c1", None, 1)[0] == 200
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO log(n, tenant_id, project_id, seq, kind, id, revision, actor_id, committed_at_ms, body, "
                 "command_id, fingerprint) VALUES (2, 't', 'p', 2, 'fact', 'f-9', 1, 'a', 1, '{\"not\": 1}', "
                 "'c-bad', ?)", ("0" * 64,))
    conn.commit()
    state = ledger.store._state  # type: ignore[attr-defined]
    status, answer = put(ledger, "c2", 1, 2)
    assert (status, answer["error"]["code"]) == (500, "storage_failure")  # type: ignore[index]
    project = state.projects[("t", "p")]
    assert (state.applied, project.head, "c-bad" in project.receipts, ("fact", "f-9") in project.resources) == (
        1, 1, False, False)
    fact = json.dumps({"fact_id": "f-9", "session_id": "s-1", "source_id": None, "actor_id": "a",
                       "content": "mended text"})
    conn.execute("UPDATE log SET body=? WHERE n=2", (fact,))
    conn.commit()
    conn.close()
    assert put(ledger, "c2", 1, 2)[0] == 200
    assert (state.applied, project.head, project.docs.get("f-9")) == (3, 3, 2)
    ledger.close()
