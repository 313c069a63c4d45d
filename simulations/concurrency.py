"""Real concurrency: seeded batches of operations launched at once from several workers.

Theory of operation. A run is a *plan*: a setup (actors, a session, one fact per actor) and a
list of batches, each a handful of fully resolved HTTP requests, each bound to a worker (a thread
with its own connection, acting as one actor). Batches are planned one at a time from what the
planner last read (so revisions go stale exactly as they do for real agents), then launched
together; every request is recorded as invoke, then ok or unknown, with monotonic times, into a
``History`` that the checker reads against the ``ledger`` model.

On the embedded reference a ``SeededScheduler`` lets exactly one worker run at a time and picks,
from the seed, who runs next at each transaction boundary the store reports (``begin``,
``decided``, ``commit``) and at each request start and end; the same plan and seed therefore give
the same interleaving, which is what makes a failure replayable. Over a URL the interleaving is
whatever the network makes of it.

An indeterminate outcome (transport error, timeout, 5xx) is resolved where the protocol allows:
the identical command is sent again; its answer (the stored receipt, or a refusal) stands for the
pair, over the interval from the first call to the last answer. Reads are not retried.
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from aidememo_ref.wire import error_detail
from simulations.errors import SimulationError
from simulations.history import Operation, Recorder
from simulations.model import LEASE_MS

__all__ = [
    "Batch",
    "EmbeddedTarget",
    "HttpTarget",
    "Plan",
    "PlannedOp",
    "SeededScheduler",
    "execute_batch",
    "Planner",
    "setup",
    "receipt_violations",
]

START_MS = 1_767_225_600_000
SOURCE = "project:sim"
SESSION_ID = "session-sim"
READER = "observer"  # a reader member: sees nothing participant-scoped
RETRYABLE = frozenset({500, 502, 503, 504})
_HANDOFF_BATCHES = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedOp:
    """One request of a batch: who sends it, what the model is told, what goes on the wire."""

    worker: int
    input: Mapping[str, Any]
    method: str
    path: str
    body: Mapping[str, Any] | None

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
    run_id: str = "r"  # inside every id the plan creates; a URL replay swaps in a fresh one

    def to_json(self) -> dict[str, Any]:
        return {"actors": list(self.actors), "workers": list(self.workers), "run_id": self.run_id,
                "batches": [b.to_json() for b in self.batches]}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Plan:
        return Plan(actors=tuple(raw["actors"]), workers=tuple(raw["workers"]), run_id=str(raw.get("run_id", "r")),
                    batches=tuple(Batch.from_json(b) for b in raw["batches"]))

    @property
    def operations(self) -> int:
        return sum(len(b.ops) for b in self.batches)


# -- scheduling -------------------------------------------------------------------------------


class SeededScheduler:
    """Runs one worker at a time; at every point the seed picks who goes next.

    The store calls ``point`` with ``begin`` once it holds the write lock. A worker that holds
    it stays the only candidate until it finishes its request (others would block inside
    SQLite, outside any point, and the run would stall), so the correct store's transactions
    stay atomic while a store that decides outside its transaction can be interleaved.
    """

    def __init__(self, seed: int, script: Sequence[int] = ()) -> None:
        self._rng = random.Random(seed)
        # Recorded decisions to follow first: a replay follows them exactly; a shrunk plan
        # follows them where it still can, so removing an operation keeps the interleaving.
        self._script = list(reversed(script))
        self._cond = threading.Condition()
        self._local = threading.local()
        self._parked: dict[int, str] = {}
        self._live: set[int] = set()
        self._running: int | None = None
        self._holder: int | None = None
        self._expected = 0
        self.decisions: list[int] = []

    def expect(self, workers: int) -> None:
        with self._cond:
            self._expected = workers

    def _pick(self) -> None:
        # Called with the lock held, when nobody is running.
        if len(self._parked) + 0 < len(self._live) or len(self._live) < self._expected:
            return  # someone is still on its way to a point
        if not self._parked:
            return
        if self._holder is not None and self._holder in self._parked:
            candidates = [self._holder]
        else:
            candidates = sorted(self._parked)
        chosen: int | None = None
        while self._script and chosen is None:
            wanted = self._script.pop()
            if wanted in candidates:
                chosen = wanted
        if chosen is None:
            chosen = candidates[self._rng.randrange(len(candidates))]
        self.decisions.append(chosen)
        self._running = chosen
        self._cond.notify_all()

    def _wait_turn(self, me: int, name: str) -> None:
        self._parked[me] = name
        if self._running == me:
            self._running = None
        self._pick()
        while self._running != me:
            self._cond.wait()
        del self._parked[me]

    def enter(self, worker: int) -> None:
        """Register the calling thread as ``worker`` and wait for its first turn."""
        self._local.worker = worker
        with self._cond:
            self._live.add(worker)
            self._wait_turn(worker, "start")

    def leave(self) -> None:
        me = self._local.worker
        with self._cond:
            self._live.discard(me)
            self._expected -= 1
            if self._holder == me:
                self._holder = None
            if self._running == me:
                self._running = None
            self._pick()

    def point(self, name: str) -> None:
        me: int | None = getattr(self._local, "worker", None)
        if me is None:
            return  # setup and planning run outside the scheduler
        with self._cond:
            if name == "begin":
                self._holder = me
            elif name == "done" and self._holder == me:
                self._holder = None
            self._wait_turn(me, name)


# -- targets ----------------------------------------------------------------------------------


class Target(Protocol):
    actors: tuple[str, ...]
    project: str
    has_reader: bool  # a non-participant reader token exists (reads by an outsider)

    def client(self, actor: str) -> httpx.Client: ...

    def now_ms(self) -> int | None: ...

    def set_clock(self, now_ms: int) -> bool: ...

    def close(self) -> None: ...


LedgerFactory = Callable[..., Any]  # (database, *, clock, scheduler) -> ReferenceLedger


def reference_factory(database: Path, *, clock: Any, scheduler: Any) -> Any:
    from aidememo_ref import ReferenceLedger

    return ReferenceLedger(database, clock=clock, scheduler=scheduler)


class EmbeddedTarget:
    """The reference ledger (or a variant of it) in-process, on a manual clock."""

    def __init__(self, actors: Sequence[str], *, seed: int, factory: LedgerFactory = reference_factory) -> None:
        from aidememo_ref import ManualClock

        self.actors = tuple(actors)
        self.project = "project-sim"
        self.has_reader = True
        self._dir = tempfile.TemporaryDirectory(prefix="aidememo-sim-")
        self.clock = ManualClock(START_MS)
        self._scheduler = SeededScheduler(seed)
        self.ledger = factory(Path(self._dir.name) / "ledger.sqlite", clock=self.clock, scheduler=self._scheduler)
        for actor in (*self.actors, READER):
            self.ledger.provision(tenant_id="tenant-sim", project_id=self.project, actor_id=actor,
                                  token=f"token-{actor}", role="reader" if actor == READER else "writer")
        self._clients: dict[str, httpx.Client] = {}

    def client(self, actor: str) -> httpx.Client:
        if actor not in self._clients:
            self._clients[actor] = httpx.Client(
                transport=self.ledger.transport(), base_url="http://ref",
                headers={"authorization": f"Bearer token-{actor}"})
        return self._clients[actor]

    def now_ms(self) -> int | None:
        return int(self.clock.now_ms())

    def set_clock(self, now_ms: int) -> bool:
        self.clock.set(now_ms)
        return True

    def new_scheduler(self, seed: int, script: Sequence[int] = ()) -> SeededScheduler:
        """A fresh scheduler for the next batch (the store keeps calling the same object)."""
        fresh = SeededScheduler(seed, script)
        self._scheduler.__dict__.update(fresh.__dict__)
        return self._scheduler

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self.ledger.close()
        self._dir.cleanup()


MAX_ANSWER_BYTES = 4 * 1024 * 1024  # the same cap the conformance suite puts on an answer


class _BoundedTransport(httpx.BaseTransport):
    """Reads each answer whole, but never more than a cap nor for longer than a deadline.

    A hostile server that floods or trickles then costs one bounded, indeterminate operation
    (an ``httpx`` error, settled like any lost answer) instead of holding the run.
    """

    def __init__(self, inner: httpx.BaseTransport, *, max_bytes: int, deadline_s: float) -> None:
        self._inner, self._max, self._deadline = inner, max_bytes, deadline_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        response = self._inner.handle_request(request)
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.stream:  # type: ignore[union-attr]
                size += len(chunk)
                if size > self._max:
                    raise httpx.ReadError(f"answer larger than {self._max} bytes", request=request)
                if time.monotonic() - started > self._deadline:
                    raise httpx.ReadTimeout(f"answer took longer than {self._deadline:g} s", request=request)
                chunks.append(chunk)
        finally:
            response.close()
        return httpx.Response(response.status_code, headers=response.headers, content=b"".join(chunks),
                              request=request, extensions=response.extensions)

    def close(self) -> None:
        self._inner.close()


class HttpTarget:
    """A server by URL, with one bearer token per actor (at least two writers, ideally a reader)."""

    def __init__(self, url: str, project: str, tokens: Mapping[str, str], *, timeout_s: float = 10.0) -> None:
        writers = [a for a in tokens if a != READER]
        if len(writers) < 2:
            raise SimulationError("a URL target needs tokens of at least two writer actors (--token ACTOR=TOKEN)")
        self.actors = tuple(writers)
        self.project = project
        self.has_reader = READER in tokens
        self.url = url.rstrip("/")
        self.tokens: Mapping[str, str] = dict(tokens)
        self._timeout = timeout_s
        self._clients: dict[str, httpx.Client] = {}
        self._has_clock: bool | None = None

    def client(self, actor: str) -> httpx.Client:
        if actor not in self._clients:
            if actor not in self.tokens:
                raise SimulationError(f"no token for actor {actor!r} on {self.url}")
            transport = _BoundedTransport(httpx.HTTPTransport(), max_bytes=MAX_ANSWER_BYTES,
                                          deadline_s=2 * self._timeout)
            self._clients[actor] = httpx.Client(
                base_url=self.url, timeout=self._timeout, transport=transport,
                headers={"authorization": f"Bearer {self.tokens[actor]}"})
        return self._clients[actor]

    def _clock(self, body: Mapping[str, int] | None) -> int | None:
        if self._has_clock is False:
            return None
        c = self.client(self.actors[0])
        try:
            r = c.post("/__test__/clock", json=body) if body else c.get("/__test__/clock")
        except httpx.HTTPError as exc:
            raise SimulationError(f"cannot reach {self.url}: {exc}") from exc
        self._has_clock = r.status_code == 200
        if not self._has_clock:
            return None
        try:
            return int(r.json()["now_ms"])
        except (ValueError, KeyError, TypeError):
            raise SimulationError(f"{self.url}/__test__/clock answered 200 without a now_ms number") from None

    def now_ms(self) -> int | None:
        return self._clock(None)

    def set_clock(self, now_ms: int) -> bool:
        now = self.now_ms()
        if now is None:
            return False
        # The extension only moves forward; a target already past the plan's time stays there.
        return now_ms <= now or self._clock({"advance_ms": now_ms - now}) is not None

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients = {}  # a later run opens fresh connections


# -- setup and planning -----------------------------------------------------------------------


def _check(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        raise SimulationError(f"setup failed: {what} answered {response.status_code} {response.text[:200]}")
    try:
        return response.json()
    except ValueError:
        raise SimulationError(f"setup failed: {what} answered 200 with a body that is not JSON: "
                              f"{response.content[:120]!r}") from None


def setup(target: Target, run_id: str) -> None:
    """One session and one fact per actor; ids carry ``run_id`` so runs never collide."""
    first = target.client(target.actors[0])
    base = f"/v1/projects/{target.project}"
    _check(first.post(f"{base}/sessions", json={"command_id": f"{run_id}-session", "payload": {
        "session_id": f"{SESSION_ID}-{run_id}", "source_id": SOURCE, "topic": "race simulation"}}), "session.create")
    for actor in target.actors:
        _check(target.client(actor).post(f"{base}/facts", json={"command_id": f"{run_id}-fact-{actor}", "payload": {
            "fact_id": f"fact-{actor}-{run_id}", "session_id": f"{SESSION_ID}-{run_id}",
            "content": f"result written by {actor}"}}), "fact.create")


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
    known: dict[str, _Known] = field(default_factory=dict)
    sent: list[PlannedOp] = field(default_factory=list)
    _counter: int = 0

    def _id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self.run_id}-{self._counter}"

    def refresh(self) -> None:
        base = f"/v1/projects/{self.target.project}/handoffs"
        for handoff_id, k in self.known.items():
            r = self.target.client(k.from_actor).get(f"{base}/{handoff_id}")
            if r.status_code == 200:
                doc = r.json()
                rec = doc["record"]
                k.revision, k.status, k.claim_id = int(doc["revision"]), str(rec["status"]), rec["claim_id"]
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
               "expected_revision": expected, "payload": payload, "now_ms": now, "fact": fact}
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

    def _status(self, handoff_id: str, actor: str) -> PlannedOp:
        inp = {"op": "handoff.status", "actor": actor, "handoff_id": handoff_id}
        worker = self._worker_of(actor) if actor in self.workers else self.rng.randrange(len(self.workers))
        return PlannedOp(worker=worker, input=inp, method="GET",
                         path=f"/v1/projects/{self.target.project}/handoffs/{handoff_id}", body=None)

    def next_batch(self) -> Batch:
        rng = self.rng
        advance = LEASE_MS + 1 if rng.random() < 0.2 else rng.choice([0, 0, 1_000])
        now = self.target.now_ms()
        if now is not None:
            now += advance
            self.target.set_clock(now)
        ops: list[PlannedOp] = []
        live = [h for h, k in self.known.items() if k.status != "completed" and k.batches < _HANDOFF_BATCHES]
        if len(live) < 2:
            sender, receiver = rng.sample(self.target.actors, 2)
            handoff_id = self._id("handoff")
            self.known[handoff_id] = _Known(from_actor=sender, to_actor=receiver)
            ops.append(self._send(handoff_id, sender, receiver))
            if rng.random() < 0.3:  # a second sender racing for the same handoff id
                other = rng.choice([a for a in self.target.actors if a != receiver])
                ops.append(self._send(handoff_id, other, receiver))
            live.append(handoff_id)
        focus = rng.choice(live)
        self.known[focus].batches += 1
        while len(ops) < self.ops_per_batch:
            roll = rng.random()
            handoff_id = focus if rng.random() < 0.7 else rng.choice(live)
            k = self.known[handoff_id]
            if roll < 0.12 and self.sent:
                original = rng.choice(self.sent[-12:])  # an identical replay of an earlier command
                inp = dict(original.input)
                if inp.get("now_ms") is not None:
                    inp["now_ms"] = now
                ops.append(PlannedOp(worker=original.worker, input=inp, method=original.method,
                                     path=original.path, body=original.body))
            elif roll < 0.25:
                viewer = rng.choice([*self.target.actors, *([READER] if self.target.has_reader else [])])
                ops.append(self._status(handoff_id, viewer))
            elif k.status != "absent" or rng.random() < 0.2:
                ops.append(self._transition(handoff_id, k, now))
                if rng.random() < 0.3:  # the same command again at once: a retry racing its original
                    first = ops[-1]
                    ops.append(PlannedOp(worker=self._worker_of(str(first.input["actor"])), input=first.input,
                                         method=first.method, path=first.path, body=first.body))
        self.sent.extend(op for op in ops if op.method == "POST")
        return Batch(clock_ms=now, ops=tuple(ops))


# -- execution ----------------------------------------------------------------------------------


def _output(response: httpx.Response, op: PlannedOp) -> dict[str, Any]:
    try:
        doc = response.json()
    except ValueError:
        doc = None
    out: dict[str, Any] = {"http": response.status_code, "code": None, "response": doc}
    detail = error_detail(doc)
    if detail is not None:
        out["code"] = detail["code"]
    elif response.status_code == 200 and isinstance(doc, dict):
        out["revision"] = doc.get("revision")
        if op.method == "GET" and isinstance(doc.get("record"), dict):
            rec = doc["record"]
            out["record"] = {k: rec.get(k) for k in ("status", "claim_id", "attempt_count", "result_fact_id", "outcome")}
        else:
            out["receipt"] = doc
    return out


def _send_once(client: httpx.Client, op: PlannedOp) -> httpx.Response:
    if op.body is None:
        return client.request(op.method, op.path)
    return client.request(op.method, op.path, content=json.dumps(op.body).encode(),
                          headers={"content-type": "application/json"})


def _perform(target: Target, op: PlannedOp, recorder: Recorder, client_id: int) -> None:
    client = target.client(str(op.input["actor"]))
    ticket = recorder.invoke(client_id, {**op.input, "request": {"method": op.method, "path": op.path}})
    delivered = False  # could any attempt have reached the target?
    for attempt in (1, 2):
        try:
            response = _send_once(client, op)
        except httpx.ConnectError:
            response = None  # refused before anything was sent
        except httpx.HTTPError:
            response, delivered = None, True
        if response is not None and response.status_code not in RETRYABLE:
            recorder.ok(ticket, _output(response, op))
            return
        delivered = delivered or response is not None
        if op.method != "POST" or attempt == 2:
            break
        # Indeterminate: the identical command again; a stored receipt or a refusal settles it.
    if delivered:
        recorder.unknown(ticket)
    else:
        recorder.fail(ticket)  # provably never took effect: nothing to check


def execute_batch(
    target: Target, workers: Sequence[str], batch: Batch, recorder: Recorder, seed: int, script: Sequence[int] = ()
) -> list[int]:
    """Launch ``batch`` at once, one thread per busy worker; returns the scheduler's decisions."""
    if batch.clock_ms is not None:
        target.set_clock(batch.clock_ms)
    scheduler = target.new_scheduler(seed, script) if isinstance(target, EmbeddedTarget) else None
    lanes: dict[int, list[PlannedOp]] = {}
    for op in batch.ops:
        lanes.setdefault(op.worker, []).append(op)
    if scheduler is not None:
        scheduler.expect(len(lanes))
    start = threading.Barrier(len(lanes)) if lanes else None
    errors: list[BaseException] = []

    def lane(worker: int, ops: list[PlannedOp]) -> None:
        try:
            if scheduler is not None:
                scheduler.enter(worker)
            elif start is not None:
                start.wait()
            for op in ops:
                if scheduler is not None:
                    scheduler.point("request")
                _perform(target, op, recorder, worker)
                if scheduler is not None:
                    scheduler.point("done")
        except BaseException as exc:  # surfaced below, in the caller's thread
            errors.append(exc)
        finally:
            if scheduler is not None:
                scheduler.leave()

    threads = [threading.Thread(target=lane, args=(w, ops), daemon=True) for w, ops in sorted(lanes.items())]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        if t.is_alive():
            raise SimulationError("a worker did not finish within 120 s; the target stalled")
    if errors:
        raise SimulationError(f"a worker failed: {errors[0]!r}") from errors[0]
    return list(scheduler.decisions) if scheduler is not None else []


# -- checks the per-handoff model cannot make ---------------------------------------------------


def receipt_violations(history: Sequence[Operation]) -> list[tuple[list[int], str]]:
    """Receipts of one command id must be byte-identical; project_seq must follow real time."""
    problems: list[tuple[list[int], str]] = []
    by_command: dict[str, list[int]] = {}
    for i, op in enumerate(history):
        out = op.output
        if out is None or out.get("http") != 200 or "receipt" not in out:
            continue
        by_command.setdefault(str(op.input.get("command_id")), []).append(i)
    first_seen: dict[str, int] = {}
    for command_id, idx in by_command.items():
        receipts = {json.dumps(history[i].output["receipt"], sort_keys=True) for i in idx}  # type: ignore[index]
        if len(receipts) > 1:
            problems.append((idx, f"command {command_id} was answered with {len(receipts)} different receipts"))
        first_seen[command_id] = min(idx, key=lambda i: history[i].call_ns)
    seqs: dict[int, str] = {}
    for command_id, i in first_seen.items():
        seq = history[i].output["receipt"].get("project_seq")  # type: ignore[index, union-attr]
        if seq in seqs and seqs[seq] != command_id:
            problems.append(([i, first_seen[seqs[seq]]], f"project_seq {seq} was given to two commands"))
        seqs[seq] = command_id
    firsts = sorted(first_seen.values(), key=lambda i: history[i].call_ns)
    for a in firsts:
        for b in firsts:
            ra, rb = history[a], history[b]
            if ra.return_ns is not None and ra.return_ns < rb.call_ns:
                sa = ra.output["receipt"].get("project_seq")  # type: ignore[index, union-attr]
                sb = rb.output["receipt"].get("project_seq")  # type: ignore[index, union-attr]
                if isinstance(sa, int) and isinstance(sb, int) and sa >= sb:
                    problems.append(([a, b], f"project_seq {sb} committed after {sa} had been answered"))
    return problems
