"""Planning races: the setup every run shares, and batches drawn from a seed.

Batches are planned one at a time from what the planner last read (so revisions go stale
exactly as they do for real agents): sends (sometimes two senders racing for one handoff id),
accepts with new or old claims, heartbeats, returns (sometimes with a fact the receiver did not
write), writes with a deliberately stale ``expected_revision``, the same command sent twice at
once, identical replays of earlier commands, and status reads by participants and by the
reader. One batch in five moves the clock past the lease.

Some interleavings are planned rather than left to chance, because they are where stale reads
and out-of-order commits show: right after a transition, its worker reads the handoff back
(the same lane, so after the answer) and another worker reads it too, while the rest of the
batch is in flight; and an agent that pipelines its next transition sends it from its second
worker at once, expecting the revision the first will produce.

Every per-batch step costs the same however long the run: the planner reads only the handoffs
still in play (an old one retires after a few batches), and draws replays from a short window.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simulations.errors import SimulationError
from simulations.model import LEASE_MS
from simulations.plan import READER, SESSION_ID, SOURCE, Batch, PlannedOp
from simulations.targets import Lost, Reply, Target

__all__ = ["Planner", "setup", "setup_requests"]

_HANDOFF_BATCHES = 10  # batches a handoff stays in play: its partition stays short
_REPLAY_WINDOW = 12  # earlier commands an identical replay is drawn from


def _answer(reply: Reply, what: str) -> Any:
    if reply.status != 200:
        raise SimulationError(f"setup failed: {what} answered {reply.status} {reply.body[:200]!r}")
    doc = reply.json()
    if doc is None:
        raise SimulationError(f"setup failed: {what} answered 200 with a body that is not JSON: {reply.body[:120]!r}")
    return doc


def _post(target: Target, actor: str, path: str, body: dict[str, Any], what: str) -> Any:
    try:
        return _answer(target.request(actor, "POST", path, json.dumps(body).encode()), what)
    except Lost as exc:
        raise SimulationError(f"setup failed: {what}: the target did not answer ({exc})") from exc


def setup_requests(project: str, actors: Sequence[str], run_id: str) -> list[tuple[str, str, dict[str, Any], str]]:
    """The setup's requests as ``(actor, path, body, what)``: one session, one fact per actor."""
    base = f"/v1/projects/{project}"
    session = f"{SESSION_ID}-{run_id}"
    requests = [(actors[0], f"{base}/sessions", {"command_id": f"{run_id}-session", "payload": {
        "session_id": session, "source_id": SOURCE, "topic": "race simulation"}}, "session.create")]
    for actor in actors:
        requests.append((actor, f"{base}/facts", {"command_id": f"{run_id}-fact-{actor}", "payload": {
            "fact_id": f"fact-{actor}-{run_id}", "session_id": session, "content": f"result written by {actor}"}},
            "fact.create"))
    return requests


def setup(target: Target, run_id: str) -> None:
    """One session and one fact per actor; ids carry ``run_id`` so runs never collide.

    Raises:
        SimulationError: when the target refuses or does not answer (one line, no traceback).
    """
    for actor, path, body, what in setup_requests(target.project, target.actors, run_id):
        _post(target, actor, path, body, what)


@dataclass(slots=True)
class _Known:
    """What the planner last read about a handoff."""

    from_actor: str
    to_actor: str
    revision: int = 0
    status: str = "absent"
    claim_id: str | None = None
    claims: list[str] = field(default_factory=list)
    batches: int = 0  # batches that touched it; old handoffs retire so partitions stay short


@dataclass(slots=True)
class Planner:
    """Plans batches from a seed and from what it reads between batches."""

    target: Target
    run_id: str
    rng: random.Random
    workers: tuple[str, ...]
    ops_per_batch: int = 6
    lease_ms: int = LEASE_MS  # the target's claim lease: one batch in five moves the clock past it
    live: dict[str, _Known] = field(default_factory=dict)  # handoffs still in play
    sent: deque[PlannedOp] = field(default_factory=lambda: deque(maxlen=_REPLAY_WINDOW))
    _counter: int = 0

    def _id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self.run_id}-{self._counter}"

    def _lease(self) -> dict[str, int]:
        """A transition's input names the target's lease when it is not upstream's, so the checker
        models it (and histories of upstream's lease stay as they were)."""
        return {} if self.lease_ms == LEASE_MS else {"lease_ms": self.lease_ms}

    def refresh(self) -> None:
        """Read the handoffs in play; retire those completed or played long enough."""
        base = f"/v1/projects/{self.target.project}/handoffs"
        for handoff_id, k in list(self.live.items()):
            if k.status == "completed" or k.batches >= _HANDOFF_BATCHES:
                del self.live[handoff_id]
                continue
            try:
                reply = self.target.request(k.from_actor, "GET", f"{base}/{handoff_id}")
            except Lost:
                continue  # the next batch plans from what was read before
            doc = reply.json() if reply.status == 200 else None
            if isinstance(doc, dict) and isinstance(doc.get("record"), dict):
                rec = doc["record"]
                try:
                    k.revision, k.status, k.claim_id = int(doc["revision"]), str(rec["status"]), rec.get("claim_id")
                except (KeyError, TypeError, ValueError):
                    continue  # a malformed answer: the checker will say what is wrong with it
                if k.claim_id and k.claim_id not in k.claims:
                    k.claims.append(k.claim_id)

    def _fact(self, actor: str) -> dict[str, Any]:
        return {"session_id": f"{SESSION_ID}-{self.run_id}", "source_id": SOURCE, "actor_id": actor}

    def _worker_of(self, actor: str) -> int:
        choices = [i for i, a in enumerate(self.workers) if a == actor]
        return self.rng.choice(choices)

    def _transition(self, handoff_id: str, k: _Known, now: int | None) -> PlannedOp:
        rng = self.rng
        kind = rng.choice(["accept", "accept", "heartbeat", "return", "return"])
        # Mostly the revision last read (concurrent writers then race on it), sometimes an
        # older one: a deliberately stale writer.
        expected = max(1, k.revision - (1 if rng.random() < 0.15 else 0))
        if kind == "accept":
            claim = rng.choice(k.claims) if k.claims and rng.random() < 0.3 else self._id("claim")
        else:
            claim = rng.choice(k.claims) if k.claims else self._id("claim")
        actor = k.to_actor if rng.random() < 0.9 else k.from_actor  # sometimes the wrong actor
        payload: dict[str, Any] = {"claim_id": claim}
        fact = None
        if kind == "return":
            author = actor if rng.random() < 0.85 else k.from_actor
            payload["result_fact_id"] = f"fact-{author}-{self.run_id}"
            payload["outcome"] = rng.choice(["succeeded", "failed"])
            fact = self._fact(author)
        command_id = self._id(f"cmd-{kind}")
        body = {"command_id": command_id, "expected_revision": expected, "payload": payload}
        inp = {"op": f"handoff.{kind}", "actor": actor, "handoff_id": handoff_id, "command_id": command_id,
               "expected_revision": expected, "payload": payload, "now_ms": now, "fact": fact, **self._lease()}
        return PlannedOp(worker=self._worker_of(actor), input=inp, method="POST",
                         path=f"/v1/projects/{self.target.project}/handoffs/{handoff_id}/{kind}", body=body)

    def _send(self, handoff_id: str, sender: str, receiver: str) -> PlannedOp:
        command_id = self._id("cmd-send")
        payload = {"handoff_id": handoff_id, "session_id": f"{SESSION_ID}-{self.run_id}", "to_actor": receiver}
        inp = {"op": "handoff.send", "actor": sender, "handoff_id": handoff_id, "command_id": command_id,
               "payload": payload, "session": {"source_id": SOURCE}, "receiver_writable": True}
        return PlannedOp(worker=self._worker_of(sender), input=inp, method="POST",
                         path=f"/v1/projects/{self.target.project}/handoffs",
                         body={"command_id": command_id, "payload": payload})

    def _status(self, handoff_id: str, actor: str, worker: int | None = None) -> PlannedOp:
        inp = {"op": "handoff.status", "actor": actor, "handoff_id": handoff_id}
        if worker is None:
            worker = self._worker_of(actor) if actor in self.workers else self.rng.randrange(len(self.workers))
        return PlannedOp(worker=worker, input=inp, method="GET",
                         path=f"/v1/projects/{self.target.project}/handoffs/{handoff_id}", body=None)

    def _read_back(self, write: PlannedOp, k: _Known) -> list[PlannedOp]:
        """Its worker reads the handoff back after the answer, and another worker reads it too."""
        handoff_id = str(write.input["handoff_id"])
        readers = (k.from_actor, k.to_actor, *([READER] if self.target.has_reader else []))
        others = [i for i, a in enumerate(self.workers) if i != write.worker and a in readers]
        other = self.rng.choice(others)
        return [self._status(handoff_id, write.actor, write.worker),
                self._status(handoff_id, self.workers[other], other)]

    def _pipelined(self, write: PlannedOp, k: _Known, now: int | None) -> PlannedOp:
        """The same agent's next transition at once, from its other worker, expecting the
        revision the first one will produce: it commits only after the first did."""
        handoff_id = str(write.input["handoff_id"])
        kind = "heartbeat" if write.input["op"] != "handoff.return" else "return"
        payload: dict[str, Any] = {"claim_id": write.input["payload"]["claim_id"]}
        if kind == "return":
            payload |= {k: v for k, v in write.input["payload"].items() if k in ("result_fact_id", "outcome")}
        expected = int(write.input["expected_revision"]) + 1
        command_id = self._id(f"cmd-{kind}")
        inp = {"op": f"handoff.{kind}", "actor": write.actor, "handoff_id": handoff_id, "command_id": command_id,
               "expected_revision": expected, "payload": payload, "now_ms": now, "fact": write.input.get("fact"),
               **self._lease()}
        worker = next((i for i, a in enumerate(self.workers) if a == write.actor and i != write.worker), write.worker)
        return PlannedOp(worker=worker, input=inp, method="POST",
                         path=f"/v1/projects/{self.target.project}/handoffs/{handoff_id}/{kind}",
                         body={"command_id": command_id, "expected_revision": expected, "payload": payload})

    def next_batch(self) -> Batch:
        rng = self.rng
        advance = self.lease_ms + 1 if rng.random() < 0.2 else rng.choice([0, 0, 1_000])
        now = self.target.now_ms()
        if now is not None:
            now = self.target.set_clock(now + advance)  # a shared clock may be past it already
        ops: list[PlannedOp] = []
        live = [h for h, k in self.live.items() if k.status != "completed" and k.batches < _HANDOFF_BATCHES]
        if len(live) < 2:
            sender, receiver = rng.sample(self.target.actors, 2)
            handoff_id = self._id("handoff")
            self.live[handoff_id] = _Known(from_actor=sender, to_actor=receiver)
            ops.append(self._send(handoff_id, sender, receiver))
            if rng.random() < 0.3:  # a second sender racing for the same handoff id
                other = rng.choice([a for a in self.target.actors if a != receiver])
                ops.append(self._send(handoff_id, other, receiver))
            live.append(handoff_id)
        focus = rng.choice(live)
        self.live[focus].batches += 1
        while len(ops) < self.ops_per_batch:
            roll = rng.random()
            handoff_id = focus if rng.random() < 0.7 else rng.choice(live)
            k = self.live[handoff_id]
            if roll < 0.12 and self.sent:
                original = rng.choice(self.sent)  # an identical replay of an earlier command
                inp = dict(original.input)
                if inp.get("now_ms") is not None:
                    inp["now_ms"] = now
                ops.append(PlannedOp(worker=original.worker, input=inp, method=original.method,
                                     path=original.path, body=original.body))
            elif roll < 0.25:
                viewer = rng.choice([*self.target.actors, *([READER] if self.target.has_reader else [])])
                ops.append(self._status(handoff_id, viewer))
            elif k.status != "absent" or rng.random() < 0.2:
                first = self._transition(handoff_id, k, now)
                ops.append(first)
                roll = rng.random()
                if roll < 0.3:  # the same command again at once: a retry racing its original
                    ops.append(PlannedOp(worker=self._worker_of(first.actor), input=first.input,
                                         method=first.method, path=first.path, body=first.body))
                elif roll < 0.55:
                    ops.extend(self._read_back(first, k))
                elif roll < 0.75:
                    ops.append(self._pipelined(first, k, now))
        self.sent.extend(op for op in ops if op.method == "POST")
        return Batch(clock_ms=now, ops=tuple(ops))
