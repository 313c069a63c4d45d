"""Upstream's remote-CLI rules as pure functions: derived ids, retry state, ``recovered``.

Each ``plan_*`` takes the typed status a client just read (``{"revision", "record"}``) and
decides, without I/O, what the next write must be: the claim derived from project, bearer actor,
handoff and attempt number (wire spec §7.3), the command id derived from exactly that evidence,
and whether the write is already applied (``recovered``: nothing is sent, nothing transitions).
The refusals are upstream's (``cmd/remote_handoff.rs``), in its order. Because the ids depend only
on the request and the canonical state, a rerun after a lost answer converges instead of
duplicating, and the next accept after a failed outcome advances to a new attempt on purpose.

Refusals raise ``ClientRefusal``, an answer missing what a rule needs ``MalformedAnswer``; the
command line maps both to upstream's wording at its own boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from refkit.records import distinct

from aidememo_wire.ids import stable_claim_id, stable_operation_id

from .errors import ClientRefusal, MalformedAnswer

__all__ = [
    "AcceptPlan",
    "HeartbeatPlan",
    "ReturnPlan",
    "ensure_fields_match",
    "normalize_outcome",
    "optional_str",
    "plan_accept",
    "plan_heartbeat",
    "plan_return",
    "record_of",
    "required_str",
    "required_u64",
]


def required_str(value: Mapping[str, Any], key: str) -> str:
    found = value.get(key)
    if not isinstance(found, str):
        raise MalformedAnswer(f"remote response omitted string field {key}")
    return found


def optional_str(value: Mapping[str, Any], key: str) -> str | None:
    found = value.get(key)
    if found is None:
        return None
    if not isinstance(found, str):
        raise MalformedAnswer(f"remote response field {key} is not a string")
    return found


def required_u64(value: Mapping[str, Any], key: str) -> int:
    found = value.get(key)
    if not isinstance(found, int) or isinstance(found, bool) or found < 0:
        raise MalformedAnswer(f"remote response omitted integer field {key}")
    return found


def record_of(status: Mapping[str, Any]) -> Mapping[str, Any]:
    record = status.get("record")
    if not isinstance(record, dict):
        raise MalformedAnswer("remote handoff response omitted record")
    return record


def ensure_fields_match(existing: Mapping[str, Any], expected: Mapping[str, Any], fields: Sequence[str]) -> None:
    """An existing canonical resource must carry exactly the evidence this client would write."""
    if any(existing.get(field) != expected.get(field) for field in fields):
        raise ClientRefusal("remote canonical resource already exists with different evidence")


def normalize_outcome(outcome: str) -> str:
    normal = outcome.strip().lower()
    if normal not in ("succeeded", "failed"):
        raise ClientRefusal("outcome must be succeeded or failed")
    return normal


def _addressed(record: Mapping[str, Any], actor_id: str) -> None:
    if required_str(record, "to_actor") != actor_id:
        raise ClientRefusal(f"remote handoff is not addressed to authenticated actor {actor_id}")


# Plans are named tuples, not dataclasses: importing dataclasses (it loads inspect) would weigh
# on every remote command line's start-up (`python bench/cli.py` times a remote inbox).
@distinct
class AcceptPlan(NamedTuple):
    """What accept sends (unless ``recovered``), and what it needs to materialize the context."""

    handoff_id: str
    revision: int
    attempt: int
    claim_id: str
    command_id: str
    recovered: bool
    session_id: str
    source_id: str | None
    context_id: str | None
    from_actor: str

    def body(self) -> dict[str, Any]:
        return {"command_id": self.command_id, "expected_revision": self.revision,
                "payload": {"claim_id": self.claim_id}}


def plan_accept(project_id: str, actor_id: str, handoff_id: str, status: Mapping[str, Any]) -> AcceptPlan:
    """The next accept: a new attempt from ``pending`` or after a failed outcome; recovery of the
    current one from (accepted, no outcome) or (completed, succeeded), if its claim is ours."""
    record = record_of(status)
    _addressed(record, actor_id)
    revision = required_u64(status, "revision")
    state = required_str(record, "status")
    attempts = required_u64(record, "attempt_count")
    outcome = optional_str(record, "outcome")
    if (state, outcome) in (("pending", None), ("accepted", "failed")):
        attempt, recovered = attempts + 1, False
    elif (state, outcome) in (("accepted", None), ("completed", "succeeded")):
        attempt, recovered = attempts, True
    else:
        raise ClientRefusal(f"remote handoff has inconsistent retry state: status={state}, outcome={outcome or 'none'}")
    claim_id = stable_claim_id(project_id, actor_id, handoff_id, attempt)
    if recovered and optional_str(record, "claim_id") != claim_id:
        raise ClientRefusal("remote handoff was accepted with a legacy or different claim; automatic retry recovery is unsafe")
    command_id = stable_operation_id("command_accept", [project_id, actor_id, handoff_id, claim_id])
    return AcceptPlan(handoff_id=handoff_id, revision=revision, attempt=attempt, claim_id=claim_id,
                      command_id=command_id, recovered=recovered, session_id=required_str(record, "session_id"),
                      source_id=optional_str(record, "source_id"), context_id=optional_str(record, "context_id"),
                      from_actor=required_str(record, "from_actor"))


@distinct
class HeartbeatPlan(NamedTuple):
    handoff_id: str
    revision: int
    claim_id: str
    command_id: str

    def body(self) -> dict[str, Any]:
        return {"command_id": self.command_id, "expected_revision": self.revision,
                "payload": {"claim_id": self.claim_id}}


def plan_heartbeat(project_id: str, actor_id: str, handoff_id: str, status: Mapping[str, Any]) -> HeartbeatPlan:
    """Renew the stored claim; the command id names the revision, so each renewal is new."""
    record = record_of(status)
    _addressed(record, actor_id)
    if required_str(record, "status") != "accepted":
        raise ClientRefusal("remote handoff must be accepted before heartbeat")
    if optional_str(record, "outcome") is not None:
        raise ClientRefusal("remote handoff with result evidence cannot be heartbeated")
    claim_id = required_str(record, "claim_id")
    revision = required_u64(status, "revision")
    command_id = stable_operation_id("command_heartbeat", [project_id, actor_id, handoff_id, claim_id, str(revision)])
    return HeartbeatPlan(handoff_id=handoff_id, revision=revision, claim_id=claim_id, command_id=command_id)


@distinct
class ReturnPlan(NamedTuple):
    handoff_id: str
    revision: int
    claim_id: str
    command_id: str
    recovered: bool
    session_id: str
    source_id: str | None
    result_fact_id: str
    outcome: str

    def body(self) -> dict[str, Any]:
        return {"command_id": self.command_id, "expected_revision": self.revision,
                "payload": {"claim_id": self.claim_id, "result_fact_id": self.result_fact_id,
                            "outcome": self.outcome}}


def plan_return(project_id: str, actor_id: str, handoff_id: str, status: Mapping[str, Any], result_fact_id: str,
                outcome: str) -> ReturnPlan:
    """Return under the record's current claim; ``recovered`` when exactly this evidence is stored
    (status is not consulted: it covers a completed success and an accepted failure alike)."""
    normal = normalize_outcome(outcome)
    record = record_of(status)
    revision = required_u64(status, "revision")
    session_id = required_str(record, "session_id")
    claim_id = required_str(record, "claim_id")
    source_id = optional_str(record, "source_id")
    stored_fact, stored_outcome = optional_str(record, "result_fact_id"), optional_str(record, "outcome")
    recovered = stored_fact == result_fact_id and stored_outcome == normal
    if not recovered and (stored_fact is not None or stored_outcome is not None):
        raise ClientRefusal("remote handoff already contains different result evidence; automatic retry recovery is unsafe")
    command_id = stable_operation_id("command_return",
                                     [project_id, actor_id, handoff_id, claim_id, result_fact_id, normal])
    return ReturnPlan(handoff_id=handoff_id, revision=revision, claim_id=claim_id, command_id=command_id,
                      recovered=recovered, session_id=session_id, source_id=source_id,
                      result_fact_id=result_fact_id, outcome=normal)
