"""The XMemo store's file: table layout 2 (one log), layout 1 upgraded in place, memory kept exact.

``fixtures/layout1.sqlite`` was written by the layout-1 release (``fixtures/make_layout1.py``):
captures with semantic keys, ``dedupe``, idempotency keys sent three ways, an expiring memory,
state slots, events and a second owner; ``fixtures/layout1.json`` holds what that release answered.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from itertools import count
from pathlib import Path

import pytest

from aidememo_ref import ManualClock
from xmemo_ref import XMemoReference
from xmemo_ref._errors import StoreError
from xmemo_ref._keys import key_digest
from xmemo_ref._log import LAYOUT_VERSION

from .fixtures import make_layout1 as fixture

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDED = json.loads((FIXTURES / "layout1.json").read_text())


def layout(path: Path) -> tuple[int, set[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return int(conn.execute("PRAGMA user_version").fetchone()[0]), tables
    finally:
        conn.close()


def old_file(tmp_path: Path) -> Path:
    db = tmp_path / "layout1.sqlite"
    shutil.copyfile(FIXTURES / "layout1.sqlite", db)
    assert layout(db) == (0, {"api_keys", "memories", "idempotency", "mcp_sessions", "sqlite_sequence"})
    return db


def opened(db: Path) -> XMemoReference:
    numbers = count(10_000)  # ids the fixture never used
    return XMemoReference(db, clock=ManualClock(RECORDED["now_ms"]),
                          new_id=lambda: str(uuid.UUID(int=next(numbers), version=4)))


def answers(reference: XMemoReference) -> list[str]:
    out = []
    for who, method, path, body in fixture.reads():
        response = reference.service.handle(method, path, fixture.headers(who),
                                            b"" if body is None else json.dumps(body).encode())
        assert response.status == 200, response.body
        out.append(response.body.decode())
    for memory_id in dict.fromkeys(json.loads(answer)["id"] for answer in RECORDED["writes"]):
        for who in ("claude", "globex"):
            response = reference.service.handle("GET", f"/v1/memories/{memory_id}/explain", fixture.headers(who))
            out.append(f"{response.status} {response.body.decode()}")
    return out


def test_a_layout_1_file_is_upgraded_and_answers_exactly_as_before(tmp_path: Path) -> None:
    db = old_file(tmp_path)
    reference = opened(db)
    assert layout(db) == (LAYOUT_VERSION, {"api_keys", "log", "mcp_sessions", "sqlite_sequence"})
    assert answers(reference) == RECORDED["reads"]
    # Every idempotent write replays its recorded answer byte for byte and writes nothing.
    writes = fixture.writes()
    for i in fixture.replays():
        who, path, body, extra = writes[i]
        response = reference.service.handle("POST", path, fixture.headers(who, **extra), json.dumps(body).encode())
        assert (response.status, response.body.decode()) == (200, RECORDED["writes"][i])
        assert ("idempotent-replayed", "true") in response.headers
    again = reference.service.handle("POST", "/v1/remember", fixture.headers("claude"),
                                     json.dumps({"content": "other", "path": "x", "idempotency_key": "k-1"}).encode())
    assert again.status == 409
    assert answers(reference) == RECORDED["reads"]
    reference.close()
    reopened = opened(db)  # a layout-2 file opens as it is
    assert answers(reopened) == RECORDED["reads"]
    reopened.close()


def test_the_upgraded_store_goes_on_with_the_rules_of_the_old_one(tmp_path: Path) -> None:
    reference = opened(old_file(tmp_path))
    sent = fixture.headers("claude")
    same = {"content": "Use the streamable HTTP transport.", "path": "decisions/transport", "scope": "memory-os",
            "semantic_key": "transport"}
    answer = json.loads(reference.service.handle("POST", "/v1/remember", sent, json.dumps(same).encode()).body)
    assert (answer["write"], answer["id"], answer["version"]) == ("unchanged", json.loads(RECORDED["writes"][2])["id"], 2)
    state = {"state_key": "active_task", "content": "done", "scope": "memory-os"}
    answer = json.loads(reference.service.handle("POST", "/v1/update_state", sent, json.dumps(state).encode()).body)
    assert (answer["write"], answer["id"], answer["version"]) == ("updated", json.loads(RECORDED["writes"][6])["id"], 3)
    reference.close()


def test_a_layout_1_file_that_cannot_be_upgraded_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    db = old_file(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE memories SET kind='bogus' WHERE seq=(SELECT max(seq) FROM memories)")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match="cannot be upgraded from table layout 1"):
        XMemoReference(db)
    assert layout(db)[0] == 0 and db.read_bytes() == before


def test_another_layout_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=7")
    conn.close()
    with pytest.raises(StoreError, match=r"has table layout 7, not the XMemo reference's 2"):
        XMemoReference(db)


def remember(reference: XMemoReference, who: str, content: str, **fields: object) -> dict[str, object]:
    response = reference.service.handle("POST", "/v1/remember", fixture.headers(who),
                                        json.dumps({"content": content, "path": "p", **fields}).encode())
    assert response.status == 200, response.body
    return json.loads(response.body)  # type: ignore[no-any-return]


def test_two_references_on_one_file_see_each_others_writes_and_replays(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    # One clock for both: the two captures score alike, so recency orders them, and two writes
    # inside one wall-clock millisecond would leave the order to their random ids.
    clock = ManualClock()
    first = XMemoReference(db, clock=clock)
    for key, options in fixture.KEYS.values():
        first.provision(key=key, **options)
    second = XMemoReference(db, clock=clock)
    written = remember(first, "claude", "redis timeout decision", idempotency_key="k")
    assert remember(second, "claude", "redis timeout decision", idempotency_key="k") == written
    recall = json.dumps({"query": "redis"}).encode()
    items = json.loads(second.service.handle("POST", "/v1/recall/context", fixture.headers("codex"), recall).body)
    assert [item["id"] for item in items["items"]] == [written["id"]]
    clock.advance(1)
    later = remember(second, "claude", "redis pool fix")
    items = json.loads(first.service.handle("POST", "/v1/recall/context", fixture.headers("codex"), recall).body)
    assert [item["id"] for item in items["items"]] == [later["id"], written["id"]]
    first.close()
    second.close()


def test_a_log_row_memory_cannot_fold_is_a_500_until_it_is_mended(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    reader = XMemoReference(db)
    for key, options in fixture.KEYS.values():
        reader.provision(key=key, **options)
    writer = XMemoReference(db)
    remember(writer, "claude", "first")
    conn = sqlite3.connect(db)
    (original,) = conn.execute("SELECT answer FROM log WHERE n=1").fetchone()
    conn.execute("UPDATE log SET answer=? WHERE n=1", (json.dumps({"not": "a memory"}),))
    conn.commit()
    recall = json.dumps({"query": "first"}).encode()
    assert reader.service.handle("POST", "/v1/recall/context", fixture.headers("codex"), recall).status == 500
    with pytest.raises(StoreError, match="damaged log"):
        XMemoReference(db)
    conn.execute("UPDATE log SET answer=? WHERE n=1", (original,))
    conn.commit()
    conn.close()
    answer = reader.service.handle("POST", "/v1/recall/context", fixture.headers("codex"), recall)
    assert answer.status == 200 and len(json.loads(answer.body)["items"]) == 1
    writer.close()
    reader.close()


def test_a_key_changed_by_another_connection_is_checked_again_before_any_answer(tmp_path: Path) -> None:
    # The service checks a key against what its thread last read and lets the next statement
    # confirm it; every answer, a refusal of the body included, must be the one a fresh check gives.
    db = tmp_path / "x.sqlite"
    served = XMemoReference(db)
    for key, options in fixture.KEYS.values():
        served.provision(key=key, **options)
    other = XMemoReference(db)
    cases = [("/v1/remember", {"content": "after", "path": "p"}), ("/v1/remember", {"path": "no content"}),
             ("/v1/recall/context", {"query": "before"}), ("/v1/auth/token/validate", None)]
    for i, (path, body) in enumerate(cases):
        key = f"fixture-revoked-key-{i}-0123456789abcdef"
        served.provision(key=key, owner_id="acme")
        sent = [(b"x-api-key", key.encode()), (b"content-type", b"application/json")]
        assert served.service.handle("GET", "/v1/auth/token/validate", sent).status == 200  # now remembered
        other.store.deactivate(key_digest(key))
        method = "GET" if body is None else "POST"
        response = served.service.handle(method, path, sent, b"" if body is None else json.dumps(body).encode())
        assert (path, response.status) == (path, 403), response.body
    new_key = "fixture-late-key-0123456789abcdefgh"
    assert served.service.handle("GET", "/v1/auth/token/validate", [(b"x-api-key", new_key.encode())]).status == 403
    other.provision(key=new_key, owner_id="acme")
    assert served.service.handle("GET", "/v1/auth/token/validate", [(b"x-api-key", new_key.encode())]).status == 200
    served.close()
    other.close()
