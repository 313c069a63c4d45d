"""PostgreSQL's receipt lookup reads one receipt through the primary key, whatever the planner
knows: on a fresh database (no statistics yet) a lookup by equality went through the
(tenant, project, project_seq) key and walked every receipt of the project, so each command
cost more than the one before until autovacuum analyzed the table. The lookup asks for the first
command id at or after the one given and keeps it only if it is that one: these tests pin the
plan and that a neighbouring id is never taken for the command's own."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest

from aidememo_ref import ManualClock, ReferenceLedger
from aidememo_ref._postgres import _RECEIPT_AND_RESOURCE

TOKEN = "writer-token-0123456789"
PROJECT = "project_http"


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[ReferenceLedger]:
    ledger = ReferenceLedger(postgres_url=postgres_url, clock=ManualClock(1_000))
    ledger.provision(tenant_id="t", project_id=PROJECT, actor_id="writer", token=TOKEN, project_epoch="e")
    yield ledger
    ledger.close()


def _put(ledger: ReferenceLedger, command_id: str, rid: str) -> httpx.Response:
    with httpx.Client(transport=ledger.transport(), base_url="http://ref",
                      headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        return http.post("/v1/commands", json={
            "command_id": command_id, "project_id": PROJECT, "expected_revision": None,
            "operation": "resource.put", "payload": {"i": 1}, "resource": {"kind": "custom.note", "id": rid},
            "change": "upsert"})


def test_the_lookup_probes_the_primary_key_on_a_table_never_analyzed(ledger: ReferenceLedger,
                                                                     postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE ssot_receipts SET (autovacuum_enabled = false)")  # no statistics, ever
    for i in range(300):
        assert _put(ledger, f"c-{i:04d}", f"r-{i % 8}").status_code == 200
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        analyzed = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'ssot_receipts'").fetchone()
        assert analyzed is not None and float(str(analyzed[0])) < 0
        conn.execute("SET plan_cache_mode = force_generic_plan")  # what a prepared statement runs
        names = ["t", "p", "cmd", "kind", "rid"]
        statement = _RECEIPT_AND_RESOURCE
        for n, name in enumerate(names, 1):
            statement = statement.replace(f"%({name})s", f"${n}")
        conn.execute(f"PREPARE lookup (text, text, text, text, text) AS {statement}")
        plan = [str(row[0]) for row in conn.execute(
            f"EXPLAIN EXECUTE lookup ('t', '{PROJECT}', 'c-0150', 'custom.note', 'r-1')")]
    at = next(n for n, line in enumerate(plan) if "ssot_receipts" in line)
    assert "ssot_receipts_pkey" in plan[at], "\n".join(plan)
    assert "Index Cond" in plan[at + 1] and "command_id" in plan[at + 1], "\n".join(plan)


def test_a_command_between_two_receipts_is_new_and_a_replay_is_recognised(ledger: ReferenceLedger,
                                                                           postgres_url: str) -> None:
    first, after = _put(ledger, "c-1", "r"), _put(ledger, "c-3", "r")
    assert (first.status_code, after.status_code) == (200, 200)
    between = _put(ledger, "c-2", "r")  # the lookup's first id at or after "c-2" is "c-3"
    assert between.status_code == 200, between.text
    assert (between.json()["project_seq"], between.json()["revision"]) == (3, 3)
    replay = _put(ledger, "c-3", "r")
    assert replay.status_code == 200 and replay.json() == after.json()
    beyond = _put(ledger, "c-9", "r")  # no id at or after it
    assert beyond.status_code == 200 and (beyond.json()["project_seq"], beyond.json()["revision"]) == (4, 4)
    with psycopg.connect(postgres_url) as conn:
        count = conn.execute("SELECT count(*) FROM ssot_receipts WHERE project_id = %s", (PROJECT,)).fetchone()
    assert count is not None and count[0] == 4
