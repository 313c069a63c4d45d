"""The local CLI against an independent model of the local rules, one random command at a time.

The model below is written from the handoff spec (§2.3, §6.3), not from ``_rules``; every step
runs the real command line on a real store and compares the stored record with the model.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from aidememo_cli._commands import main
from .conftest import _CLI_ENV

SENDER, SOURCE = "sender", "team"
RECEIVERS = ("r1", "r2")
ACTORS = (*RECEIVERS, SENDER)
CLAIMS = (None, "worker-a", "worker-b")
FACT_KINDS = ("fresh", "previous", "unattached", "foreign", "by_sender", "missing")


@dataclass
class Expected:
    """What the spec says one assignment looks like now."""

    to_actor: str
    status: str = "pending"
    claim_id: str | None = None
    attempt_count: int = 0
    outcome: str | None = None
    result_fact_id: str | None = None
    heartbeat_count: int = 0
    revision: int = 0


class LocalLifecycle(RuleBasedStateMachine):
    handoffs = Bundle("handoffs")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="aidememo-machine-"))
        self.store = str(self.dir / "s.sqlite")
        self.model: dict[str, Expected] = {}
        self.last_fact: dict[str, str] = {}
        self.updated: dict[str, int] = {}
        self.facts_added = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *argv: str) -> tuple[int, Any]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["--store", self.store, "--json", *argv])
        if rc == 0:
            return rc, json.loads(out.getvalue())
        (line,) = err.getvalue().splitlines()  # upstream's one line: "Error: <message>"
        return rc, {"message": line.removeprefix("Error: ")}

    @initialize()
    def session_and_profiles(self) -> None:
        rc, session = self.cli("session", "new", "--source-id", SOURCE, "machine")
        assert rc == 0
        self.session_id = session["session_id"]
        for alias in RECEIVERS:
            assert self.cli("agent", "add", alias, "--type", "manual")[0] == 0

    @rule(target=handoffs, receiver=st.sampled_from(RECEIVERS))
    def send(self, receiver: str) -> str:
        rc, record = self.cli("handoff", "send", receiver, "--from", SENDER, "--source-id", SOURCE, self.session_id)
        assert rc == 0, record
        self.model[record["handoff_id"]] = Expected(to_actor=receiver)
        return str(record["handoff_id"])

    @rule(handoff=handoffs, actor=st.sampled_from(ACTORS), claim=st.sampled_from(CLAIMS))
    def accept(self, handoff: str, actor: str, claim: str | None) -> None:
        m = self.model[handoff]
        if actor != m.to_actor or m.status == "completed":
            expect = "refused"
        elif m.status == "pending":
            m.status, m.claim_id, m.attempt_count, m.revision, expect = "accepted", claim, m.attempt_count + 1, m.revision + 1, "changed"
        elif m.claim_id == claim:
            expect = "unchanged"
        elif m.outcome == "failed" and claim is not None:
            m.claim_id, m.attempt_count, m.outcome, m.result_fact_id = claim, m.attempt_count + 1, None, None
            m.revision += 1
            expect = "changed"
        else:
            expect = "refused"
        argv = ["handoff", "accept", "--actor-id", actor, *(["--claim-id", claim] if claim else []), handoff]
        rc, data = self.cli(*argv)
        assert (rc == 0) == (expect != "refused"), (expect, data)
        if rc == 0:
            # An identical retry writes nothing: the revision tells a change from a no-op.
            assert data["assignment"]["revision"] == m.revision
        else:
            assert data["message"].startswith("invalid input: ")

    @rule(handoff=handoffs, actor=st.sampled_from(ACTORS))
    def heartbeat(self, handoff: str, actor: str) -> None:
        m = self.model[handoff]
        ok = actor == m.to_actor and m.status == "accepted"
        if ok:
            m.heartbeat_count, m.revision = m.heartbeat_count + 1, m.revision + 1
        rc, data = self.cli("handoff", "heartbeat", "--actor-id", actor, handoff)
        assert (rc == 0) == ok, data

    def evidence(self, handoff: str, kind: str) -> str:
        m = self.model[handoff]
        if kind == "missing":
            return "01HZZZZZZZZZZZZZZZZZZZZZZZ"
        if kind == "previous" and handoff in self.last_fact:
            return self.last_fact[handoff]
        flags = {
            "unattached": ["--actor-id", m.to_actor, "--source-id", SOURCE],
            "foreign": ["--actor-id", m.to_actor, "--source-id", "elsewhere", "--entities", self.session_id],
            "by_sender": ["--actor-id", SENDER, "--source-id", SOURCE, "--session-id", self.session_id],
        }.get(kind, ["--actor-id", m.to_actor, "--source-id", SOURCE, "--session-id", self.session_id])
        self.facts_added += 1  # distinct content: identical content in one source is one fact
        rc, fact = self.cli("fact", "add", f"{kind} evidence {self.facts_added}", *flags)
        assert rc == 0, fact
        return str(fact["id"])

    @rule(handoff=handoffs, actor=st.sampled_from(ACTORS), outcome=st.sampled_from(("succeeded", "failed")),
          kind=st.sampled_from(FACT_KINDS))
    def return_result(self, handoff: str, actor: str, outcome: str, kind: str) -> None:
        m = self.model[handoff]
        fact_id = self.evidence(handoff, kind)
        good = kind in ("fresh", "previous")  # "previous" falls back to a fresh good fact
        if actor != m.to_actor or m.status == "pending":
            expect = "refused"
        elif m.status == "completed":
            expect = "unchanged" if (m.result_fact_id, m.outcome) == (fact_id, outcome) else "refused"
        elif not good:
            expect = "refused"
        else:
            m.result_fact_id, m.outcome, m.revision = fact_id, outcome, m.revision + 1
            m.status = "completed" if outcome == "succeeded" else "accepted"
            expect = "changed"
        rc, data = self.cli("handoff", "return", "--outcome", outcome, "--result-fact-id", fact_id, "--actor-id", actor, handoff)
        assert (rc == 0) == (expect != "refused"), (expect, kind, data)
        if rc != 0:
            missing = kind == "missing" and m.status == "accepted" and actor == m.to_actor
            assert data["message"].startswith("fact not found: " if missing else "invalid input: "), data
        elif good:
            self.last_fact[handoff] = fact_id

    @invariant()
    def stored_records_match_the_model(self) -> None:
        for handoff, m in self.model.items():
            rc, record = self.cli("handoff", "show", handoff)
            assert rc == 0
            got = {key: record[key] for key in vars(m)}
            assert got == vars(m), handoff

    @invariant()
    def updated_at_only_grows(self) -> None:
        import sqlite3

        with contextlib.closing(sqlite3.connect(self.store)) as db:
            for handoff, updated_at in db.execute("SELECT handoff_id, updated_at FROM handoffs"):
                assert updated_at >= self.updated.get(handoff, updated_at)
                self.updated[handoff] = updated_at


@pytest.mark.parametrize("budget", [pytest.param(20, id="default"), pytest.param(300, id="deep", marks=pytest.mark.slow)])
def test_local_cli_matches_the_model(budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CLI_ENV:
        monkeypatch.delenv(name, raising=False)
    run_state_machine_as_test(
        LocalLifecycle,
        settings=settings(max_examples=budget, stateful_step_count=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )
