"""A campaign's plan: who races, and the batches of fully resolved requests they send.

A plan is data, written into replay files: actors, workers (threads, each acting as one actor
with its own connection), and batches of requests launched together. Every id a plan creates
carries its run id, so the same plan can be sent again to a long-lived server with fresh ids
(``Plan.rebased``). This module only describes; nothing here sends a request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simulations.errors import SimulationError

__all__ = [
    "READER",
    "RUN_ID",
    "SESSION_ID",
    "SOURCE",
    "START_MS",
    "Batch",
    "Plan",
    "PlannedOp",
    "actor_names",
    "with_run_placeholder",
    "workers_for",
]

START_MS = 1_767_225_600_000  # the embedded clock's start: 2026-01-01T00:00:00Z
SOURCE = "project:sim"
SESSION_ID = "session-sim"
READER = "observer"  # a reader member: sees nothing participant-scoped
RUN_ID = "r"  # embedded runs start from an empty ledger, so their ids need no uniqueness
_RUN_ID = re.compile(r'(?<=-)r(?=[-"])|(?<=")r(?=-)')


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedOp:
    """One request of a batch: who sends it, what the model is told, what goes on the wire."""

    worker: int
    input: Mapping[str, Any]
    method: str
    path: str
    body: Mapping[str, Any] | None

    @property
    def actor(self) -> str:
        return str(self.input["actor"])

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "input": dict(self.input), "method": self.method,
                "path": self.path, "body": None if self.body is None else dict(self.body)}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> PlannedOp:
        return PlannedOp(worker=int(raw["worker"]), input=raw["input"], method=str(raw["method"]),
                         path=str(raw["path"]), body=raw.get("body"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    # The target's clock is set to this before the batch (None: leave it). Absolute, not a
    # step, so that dropping a batch while shrinking does not move later batches in time.
    clock_ms: int | None
    ops: tuple[PlannedOp, ...]

    def to_json(self) -> dict[str, Any]:
        return {"clock_ms": self.clock_ms, "ops": [op.to_json() for op in self.ops]}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Batch:
        clock = raw.get("clock_ms")
        return Batch(clock_ms=None if clock is None else int(clock),
                     ops=tuple(PlannedOp.from_json(o) for o in raw["ops"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Everything needed to run the same races again: actors, workers, batches."""

    actors: tuple[str, ...]
    workers: tuple[str, ...]  # worker index -> actor
    batches: tuple[Batch, ...]
    run_id: str = RUN_ID  # inside every id the plan creates; a URL replay swaps in a fresh one

    def to_json(self) -> dict[str, Any]:
        return {"actors": list(self.actors), "workers": list(self.workers), "run_id": self.run_id,
                "batches": [b.to_json() for b in self.batches]}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Plan:
        """Raises SimulationError for a malformed plan."""
        try:
            return Plan(actors=tuple(raw["actors"]), workers=tuple(raw["workers"]),
                        run_id=str(raw.get("run_id", RUN_ID)), batches=tuple(Batch.from_json(b) for b in raw["batches"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SimulationError(f"the plan is malformed ({exc!r})") from exc

    @property
    def operations(self) -> int:
        return sum(len(b.ops) for b in self.batches)

    def with_batches(self, batches: Sequence[Batch], actors: Sequence[str] | None = None) -> Plan:
        return Plan(actors=self.actors if actors is None else tuple(actors), workers=self.workers,
                    batches=tuple(batches), run_id=self.run_id)

    def rebased(self, run_id: str) -> Plan:
        """The same plan with every id it creates carrying ``run_id`` instead."""
        text = json.dumps(self.to_json(), sort_keys=True)
        marked = with_run_placeholder(text) if self.run_id == RUN_ID else text.replace(self.run_id, "@RUN@")
        return Plan.from_json(json.loads(marked.replace("@RUN@", run_id)))


def with_run_placeholder(text: str) -> str:
    """Mark the run id inside ids (``handoff-r-3``, ``session-sim-r``, ``r-fact-...``) as @RUN@."""
    return _RUN_ID.sub("@RUN@", text)


def actor_names(count: int) -> tuple[str, ...]:
    """Raises SimulationError below two: a race needs two actors."""
    if count < 2:
        raise SimulationError("at least two actors are needed for a race")
    return tuple(f"agent-{chr(ord('a') + i)}" for i in range(count))


def workers_for(actors: Sequence[str]) -> tuple[str, ...]:
    # Two workers per actor: one identity, two processes racing (a retry, a second lane).
    return tuple(a for a in actors for _ in range(2)) + (READER,)
