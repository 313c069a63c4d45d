"""The SQLite layer: CAS on ``updated_at`` and what a stale writer sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from aidememo_cli._local import _rules as rules
from aidememo_cli._local._errors import LocalError, LocalErrorCode
from aidememo_cli._local import _assignments as assignments
from aidememo_cli._local._records import Assignment, Entity, Status
from aidememo_cli._local._store import LocalStore


def _seed(path: Path) -> None:
    store = LocalStore(str(path))
    with store.transaction(write=True):
        store.add_entity(Entity(entity_id="E1", name="session-1", entity_type="session", source_page="t", created_at=1))
        store.insert_handoff(
            Assignment(handoff_id="handoff-1", session_id="session-1", source_id=None, from_actor="a", to_actor="b", created_at=1000)
        )
    store.close()


def test_two_writers_from_the_same_updated_at_one_wins_one_gets_transaction_conflict(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _seed(path)
    first, second = LocalStore(str(path)), LocalStore(str(path))
    with first.transaction(write=False):
        record_1, token_1 = assignments.load(first, "handoff-1")
    with second.transaction(write=False):
        record_2, token_2 = assignments.load(second, "handoff-1")
    assert token_1 == token_2 == 1000
    accepted = rules.accept(record_1, "b", "worker-1", 1000)
    assert accepted is not None
    with first.transaction(write=True):
        written = first.write_handoff(accepted, token_1, 1000)
    assert written == 1001  # same millisecond, still a fresh token
    competing = rules.accept(record_2, "b", "worker-2", 1000)
    assert competing is not None
    with pytest.raises(LocalError) as info, second.transaction(write=True):
        second.write_handoff(competing, token_2, 1000)
    assert info.value.code is LocalErrorCode.TRANSACTION_CONFLICT
    assert str(info.value) == "transaction conflict (concurrent write): retry needed"
    with second.transaction(write=False):
        stored, token = assignments.load(second, "handoff-1")
    assert (stored.status, stored.claim_id, stored.revision, token) == (Status.ACCEPTED, "worker-1", 1, 1001)


def test_missing_handoff_is_entity_not_found(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path / "s.sqlite"))
    with pytest.raises(LocalError) as info, store.transaction(write=False):
        assignments.load(store, "handoff-x")
    assert info.value.code is LocalErrorCode.ENTITY_NOT_FOUND
    assert str(info.value) == "entity not found: 'handoff-x'"


def test_a_refused_command_rolls_its_transaction_back(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _seed(path)
    store = LocalStore(str(path))
    with pytest.raises(LocalError), store.transaction(write=True):
        store.add_entity(Entity(entity_id="E2", name="session-2", entity_type="session", source_page="t", created_at=1))
        raise LocalError(LocalErrorCode.INVALID_INPUT, "refused after a write")
    with store.transaction(write=False):
        assert store.entity("session-2") is None


def test_a_foreign_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "wiki.sqlite"
    with sqlite3.connect(path) as db:  # what upstream's store (or anyone else's) looks like
        db.execute("CREATE TABLE facts (id TEXT)")
    with pytest.raises(LocalError) as info:
        LocalStore(str(path))
    assert "is not an aidememo-ref local store" in str(info.value)
    with sqlite3.connect(path) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["facts"]


def test_unopenable_store_is_a_storage_failure(tmp_path: Path) -> None:
    with pytest.raises(LocalError) as info:
        LocalStore(str(tmp_path / "missing-dir" / "s.sqlite"))
    assert info.value.code is LocalErrorCode.STORAGE_FAILURE
