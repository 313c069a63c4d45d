"""Frozen values of the local flow: sessions, facts, assignments and agent profiles.

Field names and JSON keys are upstream's (handoff spec §1.8); ``to_json`` keeps that order.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from .._records import Outcome, Status
from ._errors import invalid_input

__all__ = [
    "Status",
    "Outcome",
    "FactType",
    "AgentType",
    "EnvPolicy",
    "Session",
    "Fact",
    "Assignment",
    "AgentProfile",
]


# Status and Outcome are the remote protocol's own (``_records``): the local flow has the same three
# statuses ("returned" is a board lane, never a status) and the same two outcomes.


class FactType(StrEnum):
    """Fact kinds; the packet groups them into its sections (see ``_packet``)."""

    DECISION = "decision"
    CONVENTION = "convention"
    PATTERN = "pattern"
    QUESTION = "question"
    LESSON = "lesson"
    ERROR = "error"
    NOTE = "note"


class AgentType(StrEnum):
    """Agent profile adapters. ``command`` is this kit's own: it runs a configured command line."""

    CODEX = "codex"
    CLAUDE = "claude"
    MANUAL = "manual"
    COMMAND = "command"


class EnvPolicy(StrEnum):
    """Which environment a run adapter passes to the agent (upstream ``env_policy``)."""

    CORE = "core"
    ALL = "all"


def _to_json(value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in fields(value):  # type: ignore[arg-type]
        item = getattr(value, field.name)
        out[field.name] = list(item) if isinstance(item, tuple) else item
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A tracked session; its ``source_id`` is fixed at creation."""

    session_id: str
    topic: str
    source_id: str | None
    created_by: str | None
    created_at: int

    def __post_init__(self) -> None:
        if not self.topic.strip():
            raise invalid_input("session topic must not be empty")

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """A fact. It is attached to a session when the session id is one of its entities."""

    fact_id: str
    fact_type: FactType
    content: str
    entities: tuple[str, ...]
    source_id: str | None
    actor_id: str | None
    created_at: int

    def __post_init__(self) -> None:
        if not self.content.strip():
            raise invalid_input("fact content must not be empty")

    def to_json(self) -> dict[str, Any]:
        out = _to_json(self)
        out["type"] = str(out.pop("fact_type"))
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """The local ``HandoffAssignment``: a small pointer to a session, never a copy of its facts.

    ``revision`` is informational (+1 per persisted transition); the CAS token is the stored
    row's ``updated_at``, which lives beside the record, not in it.
    """

    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
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
    created_at: int
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
        out = _to_json(self)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProfile:
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

    def __post_init__(self) -> None:
        if self.agent is AgentType.COMMAND and not (self.command or "").strip():
            raise invalid_input("a command agent needs --command with the command line to run")
        if self.agent is not AgentType.COMMAND and self.command is not None:
            raise invalid_input("--command is only for --type command")

    def to_json(self) -> dict[str, Any]:
        out = _to_json(self)
        out["agent"] = str(self.agent)
        out["env_policy"] = str(self.env_policy)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentProfile:
        values = dict(data)
        values["agent"] = AgentType(values["agent"])
        values["env_policy"] = EnvPolicy(values["env_policy"])
        values["pass_env"] = tuple(values.get("pass_env") or ())
        return cls(**values)
