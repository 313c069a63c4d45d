"""PostgreSQL's write path sends a command's write with its COMMIT when the transaction has read
the resource under the project's lock, so the receipt's revision is known before the write. The
write still checks it: a writer that skipped the lock and changed the row in between makes the
command fail closed, with nothing of it committed, instead of answering a revision that is not
the row's."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest

from aidememo_ref import ManualClock, ReferenceLedger

from .test_routes import raw

TOKEN = "writer-token-0123456789"
RECEIVER = "receiver-token-0123456789"


class _SideWriter:
    """At the first ``decided`` point (the rules have read, nothing is written yet), commits
    ``sql`` on its own connection, which takes no project lock."""

    def __init__(self, url: str) -> None:
        self.url, self.sql, self.done = url, "", False

    def point(self, name: str) -> None:
        if name == "decided" and self.sql and not self.done:
            self.done = True
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(self.sql)  # type: ignore[call-overload]


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[tuple[ReferenceLedger, _SideWriter]]:
    side = _SideWriter(postgres_url)
    ledger = ReferenceLedger(postgres_url=postgres_url, clock=ManualClock(1_000), scheduler=side)
    for actor, token in (("writer", TOKEN), ("receiver", RECEIVER)):
        ledger.provision(tenant_id="t", project_id="project_http", actor_id=actor, token=token, project_epoch="e")
    yield ledger, side
    ledger.close()


def _post(ledger: ReferenceLedger, path: str, body: dict[str, object], token: str = TOKEN) -> httpx.Response:
    with httpx.Client(transport=ledger.transport(), base_url="http://ref",
                      headers={"Authorization": f"Bearer {token}"}) as http:
        return http.post(path, json=body)


def _row(url: str, sql: str, *params: object) -> tuple[object, ...] | None:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchone()  # type: ignore[call-overload, no-any-return]


def _head(url: str) -> object:
    row = _row(url, "SELECT next_seq FROM ssot_projects WHERE project_id = 'project_http'")
    assert row is not None
    return row[0]


SKIP_LOCK = "UPDATE ssot_resources SET revision = revision + 5 WHERE resource_id = '{rid}'"
INSERT_BEHIND = ("INSERT INTO ssot_resources (tenant_id, project_id, resource_kind, resource_id, revision, deleted, "
                 "body_json) VALUES ('t', 'project_http', 'custom.note', '{rid}', 7, FALSE, '\\x7b7d')")


@pytest.mark.parametrize("case", ["existing resource", "new resource", "unconditional put", "handoff accept"])
def test_a_write_that_skipped_the_lock_fails_the_command_closed(
        ledger: tuple[ReferenceLedger, _SideWriter], postgres_url: str, case: str) -> None:
    led, side = ledger
    commands = "/v1/commands"
    if case == "handoff accept":
        assert _post(led, "/v1/projects/project_http/sessions",
                     {"command_id": "s", "payload": {"session_id": "s", "topic": "t"}}).status_code == 200
        assert _post(led, "/v1/projects/project_http/handoffs", {"command_id": "h", "payload": {
            "handoff_id": "h", "session_id": "s", "to_actor": "receiver"}}).status_code == 200
        rid, path, token = "h", "/v1/projects/project_http/handoffs/h/accept", RECEIVER
        body: dict[str, object] = {"command_id": "late", "expected_revision": 1, "payload": {"claim_id": "c"}}
        side.sql = SKIP_LOCK.format(rid=rid)
    else:
        rid, path, token = "n1", commands, TOKEN
        if case == "new resource":
            body, side.sql = raw("late", rid), INSERT_BEHIND.format(rid=rid)
        else:
            assert _post(led, commands, raw("first", rid)).status_code == 200
            body = raw("late", rid, rev=1 if case == "existing resource" else None)
            side.sql = SKIP_LOCK.format(rid=rid)
    before = _head(postgres_url)

    answer = _post(led, path, body, token)

    assert side.done
    assert answer.status_code == 500, answer.text
    assert answer.json()["error"]["code"] == "storage_failure"
    assert _row(postgres_url, "SELECT 1 FROM ssot_receipts WHERE command_id = 'late'") is None
    assert _row(postgres_url, "SELECT 1 FROM ssot_changes WHERE seq > %s", before) is None
    assert _head(postgres_url) == before
    # The row is the other writer's, untouched by the command that failed.
    stored = _row(postgres_url, "SELECT revision FROM ssot_resources WHERE resource_id = %s", rid)
    assert stored == ((7,) if case == "new resource" else (6,))


def test_every_answered_revision_is_the_rows(ledger: tuple[ReferenceLedger, _SideWriter], postgres_url: str) -> None:
    """Puts on new and existing resources, a delete, a put after it and handoff transitions: each
    answer's revision is the one stored, and the changes feed has one row per command."""
    led, _ = ledger
    answers = [_post(led, "/v1/commands", raw(f"c{i}", rid, rev=rev, op=op, change=change))
               for i, (rid, rev, op, change) in enumerate([
                   ("a", None, "resource.put", "upsert"), ("a", 1, "resource.put", "upsert"),
                   ("a", None, "resource.put", "upsert"), ("a", 3, "resource.delete", "delete"),
                   ("a", None, "resource.put", "upsert"), ("b", None, "resource.put", "upsert")])]
    answers.append(_post(led, "/v1/projects/project_http/sessions",
                         {"command_id": "s", "payload": {"session_id": "s", "topic": "t"}}))
    answers.append(_post(led, "/v1/projects/project_http/handoffs", {"command_id": "h", "payload": {
        "handoff_id": "h", "session_id": "s", "to_actor": "receiver"}}))
    answers.append(_post(led, "/v1/projects/project_http/handoffs/h/accept",
                         {"command_id": "acc", "expected_revision": 1, "payload": {"claim_id": "c"}}, RECEIVER))
    assert [a.status_code for a in answers] == [200] * len(answers), [a.text for a in answers]
    revisions = [a.json()["revision"] for a in answers]
    assert revisions == [1, 2, 3, 4, 5, 1, 1, 1, 2]
    for answer in answers:
        receipt = answer.json()
        stored = _row(postgres_url, "SELECT revision FROM ssot_changes WHERE seq = %s", receipt["project_seq"])
        assert stored == (receipt["revision"],)
    final = _row(postgres_url, "SELECT revision FROM ssot_resources WHERE resource_id = 'a'")
    assert final == (5,)
    index = _row(postgres_url, "SELECT revision, status FROM ssot_handoff_index WHERE handoff_id = 'h'")
    assert index == (2, "accepted")
