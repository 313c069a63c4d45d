"""Frozen values of the local flow: entities, facts, assignments and agent profiles.

Field names and JSON keys are upstream's: ``Fact.to_json`` is its ``FactRecord``,
``Assignment.to_json`` its ``HandoffAssignment`` (handoff spec §1.8), ``AgentProfile.to_json``
its ``InstallationConfig`` (unset fields left out), each in upstream's declaration order.

The local flow's values are typed ``NamedTuple``s rather than the house's frozen dataclasses:
they are as immutable and as typed, and defining one costs a fraction of a dataclass (no
generated source to compile, no ``inspect`` import), which is most of a local command's start-up
otherwise (``docs/local.md``, start-up). Build them with keywords, change them with ``_replace``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from refkit.records import distinct
from aidememo_wire.status import Outcome, Status
from ._facttypes import FactType

__all__ = [
    "Status",
    "Outcome",
    "FactType",
    "AgentType",
    "EnvPolicy",
    "Entity",
    "Fact",
    "Assignment",
    "ASSIGNMENT_FIELDS",
    "AgentProfile",
    "SESSION_TYPE",
    "HANDOFF_TYPE",
]

# Entity types the local flow creates itself; names given to `--entities` get "unknown".
SESSION_TYPE = "session"
HANDOFF_TYPE = "handoff"


# Status and Outcome are the remote protocol's own (``aidememo_wire.status``): the local flow has
# the same three statuses ("returned" is a board lane, never a status) and the same two outcomes.


class AgentType(StrEnum):
    """Agent profile adapters. ``command`` is this kit's own: it runs a configured command line."""

    CODEX = "codex"
    CLAUDE = "claude"
    MANUAL = "manual"
    COMMAND = "command"


class EnvPolicy(StrEnum):
    """Which environment a run passes to the agent (upstream ``env_policy``)."""

    CORE = "core"
    ALL = "all"


def _json_value(item: object) -> object:
    return list(item) if isinstance(item, tuple) else item


@distinct
class Entity(NamedTuple):
    """A named node facts attach to: a session (``source_page`` is its topic), a handoff, or a
    name given to ``--entities``. Names are unique without regard to case, as upstream's."""

    entity_id: str
    name: str
    entity_type: str
    source_page: str | None
    created_at: int


@distinct
class Fact(NamedTuple):
    """Upstream's ``FactRecord``; ``entity_ids`` are entity ULIDs, ``entity_names`` their names."""

    id: str
    content: str
    fact_type: FactType
    entity_ids: tuple[str, ...]
    tags: tuple[str, ...]
    source: str | None
    source_id: str | None
    actor_id: str | None
    source_confidence: float
    relevance_score: float
    created_at: int
    updated_at: int
    observed_at: int | None
    superseded_at: int | None
    superseded_by: str | None
    access_count: int
    last_accessed_at: int
    pinned: bool
    entity_names: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {name: _json_value(value) for name, value in zip(self._fields, self)}
        del out["entity_names"]  # not part of the record
        out["fact_type"] = str(self.fact_type)
        return out


# Upstream's HandoffAssignment declaration order: the JSON's key order (``created_at`` is
# declared earlier below, because a NamedTuple's fields without defaults come first).
ASSIGNMENT_FIELDS = (
    "handoff_id", "session_id", "source_id", "from_actor", "to_actor", "from_agent", "from_profile", "to_agent",
    "to_profile", "focus", "done_when", "status", "revision", "claim_id", "attempt_count", "created_at",
    "accepted_at", "completed_at", "result_fact_id", "outcome", "returned_at", "last_heartbeat_at",
    "heartbeat_count", "upstream_system", "upstream_task_id", "upstream_board_id",
)


@distinct
class Assignment(NamedTuple):
    """The local ``HandoffAssignment``: a small pointer to a session, never a copy of its facts.

    ``revision`` is informational (+1 per persisted transition); the CAS token is the stored
    row's ``updated_at``, which lives beside the record, not in it.
    """

    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    created_at: int
    from_agent: str | None = None
    from_profile: str | None = None
    to_agent: str | None = None
    to_profile: str | None = None
    focus: str | None = None
    done_when: str | None = None
    status: Status = Status.PENDING
    revision: int = 0
    claim_id: str | None = None
    attempt_count: int = 0
    accepted_at: int | None = None
    completed_at: int | None = None
    result_fact_id: str | None = None
    outcome: Outcome | None = None
    returned_at: int | None = None
    last_heartbeat_at: int | None = None
    heartbeat_count: int = 0
    upstream_system: str | None = None
    upstream_task_id: str | None = None
    upstream_board_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in ASSIGNMENT_FIELDS}
        out["status"] = str(self.status)
        out["outcome"] = None if self.outcome is None else str(self.outcome)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Assignment:
        values = dict(data)
        values["status"] = Status(values["status"])
        if values.get("outcome") is not None:
            values["outcome"] = Outcome(values["outcome"])
        return cls(**values)


@distinct
class AgentProfile(NamedTuple):
    """Where and how an alias runs: routing metadata and paths only, never credentials."""

    alias: str
    agent: AgentType
    binary: str | None = None
    config_home: str | None = None
    workspace: str | None = None
    source_id: str | None = None
    model: str | None = None
    env_policy: EnvPolicy = EnvPolicy.CORE
    pass_env: tuple[str, ...] = ()
    command: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Upstream's ``InstallationConfig``: no alias, unset options and an empty
        ``pass_env`` left out; ``command`` only for this kit's command adapter."""
        out: dict[str, Any] = {"agent": str(self.agent)}
        for name in ("binary", "config_home", "workspace", "source_id", "model"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["env_policy"] = str(self.env_policy)
        if self.pass_env:
            out["pass_env"] = list(self.pass_env)
        if self.command is not None:
            out["command"] = self.command
        return out

    @classmethod
    def from_json(cls, alias: str, data: dict[str, Any]) -> AgentProfile:
        values = dict(data)
        values["agent"] = AgentType(values["agent"])
        values["env_policy"] = EnvPolicy(values.get("env_policy", "core"))
        values["pass_env"] = tuple(values.get("pass_env") or ())
        return cls(alias=alias, **values)
