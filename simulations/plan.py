"""A campaign's plan: who races, and the batches of fully resolved requests they send.

A plan is data, written into replay files: actors, workers (threads, each acting as one actor
with its own connection), the project its paths name, and batches of requests launched
together. Every id a plan creates carries its run id, so the same plan can be sent again to a
long-lived server with fresh ids in another project (``Plan.rebased``), and a batch can be moved
to another moment of a server's clock (``Batch.at``). This module only describes; nothing here
sends a request.
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
    "EMBEDDED_PROJECT",
    "SEGMENT_BATCHES",
    "START_MS",
    "Batch",
    "Plan",
    "PlannedOp",
    "actor_names",
    "batch_seed",
    "marked_run",
    "segment_seed",
    "workers_for",
]

START_MS = 1_767_225_600_000  # the embedded clock's start: 2026-01-01T00:00:00Z
SOURCE = "project:sim"
SESSION_ID = "session-sim"
READER = "observer"  # a reader member: sees nothing participant-scoped
RUN_ID = "r"  # embedded runs start from an empty ledger, so their ids need no uniqueness
EMBEDDED_PROJECT = "project-sim"  # the embedded target's project
# A campaign with a history file moves to a fresh embedded reference every this many batches, so
# that what its checks and the reference keep follows the segment, not the run. The planner
# retires a handoff after 10 batches and replays commands of the last 12, so a planned race
# spans a few batches; at about 200 batches a second, a segment is some ten seconds of a run.
SEGMENT_BATCHES = 2_000
_PROJECT_PATH = re.compile(r"^/v1/projects/([^/?]+)")
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

    def in_project(self, old: str, new: str) -> PlannedOp:
        """The same request sent to project ``new`` instead of ``old``."""
        prefix = f"/v1/projects/{old}"
        if not self.path.startswith(prefix):
            return self
        return PlannedOp(worker=self.worker, input=self.input, method=self.method,
                         path=f"/v1/projects/{new}{self.path[len(prefix):]}", body=self.body)


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

    def at(self, clock_ms: int | None) -> Batch:
        """The same batch at ``clock_ms``: the clock it sets and the time the model is told (None:
        a target whose clock cannot be read or moved; the model then does not know the time)."""
        ops = tuple(op if op.input.get("now_ms") is None else
                    PlannedOp(worker=op.worker, input={**op.input, "now_ms": clock_ms}, method=op.method,
                              path=op.path, body=op.body) for op in self.ops)
        return Batch(clock_ms=clock_ms, ops=ops)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Everything needed to run the same races again: actors, workers, project, batches."""

    actors: tuple[str, ...]
    workers: tuple[str, ...]  # worker index -> actor
    batches: tuple[Batch, ...]
    run_id: str = RUN_ID  # inside every id the plan creates; a URL replay swaps in a fresh one
    project: str = EMBEDDED_PROJECT  # the project every path names; a URL replay swaps in its own

    def to_json(self) -> dict[str, Any]:
        return {"actors": list(self.actors), "workers": list(self.workers), "run_id": self.run_id,
                "project": self.project, "batches": [b.to_json() for b in self.batches]}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Plan:
        """Raises SimulationError for a malformed plan."""
        try:
            batches = tuple(Batch.from_json(b) for b in raw["batches"])
            project = raw.get("project")
            if project is None:  # files written before plans named their project: the paths do
                named = (_PROJECT_PATH.match(op.path) for b in batches for op in b.ops)
                project = next((m.group(1) for m in named if m), EMBEDDED_PROJECT)
            return Plan(actors=tuple(raw["actors"]), workers=tuple(raw["workers"]),
                        run_id=str(raw.get("run_id", RUN_ID)), project=str(project), batches=batches)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SimulationError(f"the plan is malformed ({exc!r})") from exc

    @property
    def operations(self) -> int:
        return sum(len(b.ops) for b in self.batches)

    @property
    def identities(self) -> tuple[str, ...]:
        """Who needs a token to run this plan: its actors (the setup writes as each), and the
        reader when one of its requests is the reader's."""
        readers = any(op.actor == READER for b in self.batches for op in b.ops)
        return (*self.actors, *((READER,) if readers else ()))

    def with_batches(self, batches: Sequence[Batch], actors: Sequence[str] | None = None) -> Plan:
        return Plan(actors=self.actors if actors is None else tuple(actors), workers=self.workers,
                    batches=tuple(batches), run_id=self.run_id, project=self.project)

    def rebased(self, run_id: str, project: str | None = None) -> Plan:
        """The same plan with every id it creates carrying ``run_id`` instead, and every path
        naming ``project`` (default: the plan's own)."""
        text = json.dumps([b.to_json() for b in self.batches], sort_keys=True)
        batches = [Batch.from_json(b) for b in json.loads(marked_run(text, self.run_id).replace("@RUN@", run_id))]
        project = self.project if project is None else project
        if project != self.project:
            batches = [Batch(clock_ms=b.clock_ms, ops=tuple(op.in_project(self.project, project) for op in b.ops))
                       for b in batches]
        return Plan(actors=self.actors, workers=self.workers, batches=tuple(batches), run_id=run_id, project=project)


def marked_run(text: str, run_id: str) -> str:
    """``text`` with ``run_id`` marked as @RUN@ wherever it stands inside an id (``handoff-r-3``,
    ``session-sim-r``, ``r-fact-...``; a URL run's ids carry a run id no other text contains)."""
    return _RUN_ID.sub("@RUN@", text) if run_id == RUN_ID else text.replace(run_id, "@RUN@")


def actor_names(count: int) -> tuple[str, ...]:
    """Raises SimulationError below two: a race needs two actors."""
    if count < 2:
        raise SimulationError("at least two actors are needed for a race")
    return tuple(f"agent-{chr(ord('a') + i)}" for i in range(count))


def workers_for(actors: Sequence[str]) -> tuple[str, ...]:
    # Two workers per actor: one identity, two processes racing (a retry, a second lane).
    return tuple(a for a in actors for _ in range(2)) + (READER,)


def batch_seed(seed: int, index: int) -> int:
    """The scheduler's seed for batch ``index``: independent streams from one printed seed. Both
    campaigns (AideMemo's and XMemo's) and the clients race draw from it, and replay files hold
    plans whose interleavings it decided: its values never change (``tests/sim/test_seeds.py``
    pins a few)."""
    return (seed * 1_000_003 + index) & 0xFFFF_FFFF_FFFF


def segment_seed(seed: int, segment: int) -> int:
    """The seed of a campaign's segment ``segment``: the campaign's own for the first (so a run
    that never rotates is the run it always was); batch seeds are drawn from it as from a run's."""
    return seed if segment == 0 else (seed * 1_000_003 + (segment << 32)) & 0xFFFF_FFFF_FFFF
