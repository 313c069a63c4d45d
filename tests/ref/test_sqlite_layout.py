"""Opening SQLite files of other table layouts: layout 2 is upgraded in place, the rest refused.

Layout 2 (the previous release) has exactly layout 3's tables and rows; layout 3 adds the two
triggers that move a resource row from its change insert. A layout-2 file is therefore made
here as a layout-3 file with its triggers dropped and ``user_version`` set back to 2.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from aidememo_ref import ReferenceLedger
from aidememo_ref._sqlite import LAYOUT_VERSION
from aidememo_ref._store import StoreError

TOKEN = "l" * 48
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]
CLI = [sys.executable, "-c", "from aidememo_ref._cli import main; raise SystemExit(main())"]


def put(ledger: ReferenceLedger, command_id: str, expected: int | None, value: int) -> bytes:
    body = json.dumps({"command_id": command_id, "project_id": "p", "expected_revision": expected,
                       "operation": "resource.put", "payload": {"value": value},
                       "resource": {"kind": "custom.note", "id": "n1"}, "change": "upsert"}).encode()
    response = ledger.handle("POST", "/v1/commands", AUTH, body)
    assert response.status == 200, response.body
    return response.body


def downgrade_to_layout_2(path: Path) -> None:
    conn = sqlite3.connect(path)
    triggers = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
    assert len(triggers) == 2, triggers
    for name in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()


def layout(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_a_layout_2_file_is_upgraded_and_keeps_its_receipts_and_revisions(tmp_path: Path) -> None:
    db = tmp_path / "ssot.sqlite"
    ledger = ReferenceLedger(db)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    receipts = [put(ledger, "c1", None, 1), put(ledger, "c2", 1, 2)]
    ledger.close()
    downgrade_to_layout_2(db)

    reopened = ReferenceLedger(db)
    assert layout(db) == LAYOUT_VERSION
    assert [put(reopened, "c1", None, 1), put(reopened, "c2", 1, 2)] == receipts  # replays, byte for byte
    third = json.loads(put(reopened, "c3", 2, 3))
    assert (third["revision"], third["project_seq"]) == (3, 3)
    snapshot = reopened.handle("GET", "/v1/projects/p/snapshot", AUTH, b"")
    assert snapshot.status == 200, snapshot.body
    epoch = json.loads(snapshot.body)["project_epoch"]
    feed = reopened.handle("GET", f"/v1/projects/p/changes?after_seq=0&project_epoch={epoch}", AUTH, b"")
    reopened.close()
    assert feed.status == 200, feed.body
    assert [entry["revision"] for entry in json.loads(feed.body)["entries"]] == [1, 2, 3]
    [resource] = json.loads(snapshot.body)["resources"]
    assert resource["revision"] == 3  # the trigger moved the row the upgrade found at revision 2


def test_files_of_other_layouts_are_refused_unchanged(tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE changes(x)")
    conn.execute("PRAGMA user_version=4")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"has table layout 4, not this reference's 3; start from a new database file"):
        ReferenceLedger(old)
    assert layout(old) == 4

    foreign = tmp_path / "local.sqlite"  # the local CLI's store also says user_version 2
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE facts(id TEXT)")
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="is not a reference ledger file"):
        ReferenceLedger(foreign)
    assert layout(foreign) == 2
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
    assert "has table layout 4, not this reference's 3; start from a new database file" in done.stderr
