"""The kit's remote client under the simulator: recovery races found the way server races are.

The remote CLI, the stdio MCP server and ``AideMemoClient`` decide accept and return with one
planner (derived claim and command ids, ``recovered``) and send through one seam (a POST retried
once with the identical body after a transport failure). This module runs that same client code
against any simulation target, the embedded reference under the seeded scheduler or a server by
URL: each worker is an ``AideMemoClient`` of the receiving actor whose transport is the target,
answers are lost on purpose after the target applied them (seeded), and a worker whose call ends
in doubt runs the same call again, as a user reruns a command.

Two judges. Every request the clients sent is recorded as an ordinary history operation, so the
ledger model and the receipt rules check the server exactly as in ``aidememo-sim run``. And the
client's own promise is checked against what the server committed: one intent (an accept attempt,
a return's evidence) makes at most one transition, an accept reports the claim the server holds
for its attempt, a return that answered leaves its evidence on the record.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from aidememo_wire.ids import stable_claim_id
from aidememo_client.client import AideMemoClient, AideMemoClientError, AideMemoHTTPError, OutcomeUnknown
from refkit.jsonvalue import loads
from simulations.campaign import BatchHooks, Finding, check_history
from simulations.execution import output_of
from simulations.linearizability.history import Operation, Recorder
from simulations.plan import SESSION_ID, SOURCE, PlannedOp, batch_seed
from simulations.planner import setup
from simulations.targets import Lost, Target

__all__ = ["ClientRun", "TargetTransport", "run_client_campaign"]

ClientClass = Callable[..., AideMemoClient]
_RERUNS = 4  # how often a worker runs a call again after it ended in doubt


class TargetTransport(httpx.BaseTransport):
    """httpx over a simulation target: the client's requests go where the simulator's go.

    The target authenticates as ``actor`` (the client's own token header is not used). With a
    ``loss`` rule an answer the target produced is dropped (a transport error to the client);
    with a ``recorder`` each handoff request becomes one history operation.
    """

    def __init__(self, target: Target, actor: str, worker: int, *, recorder: Recorder | None = None,
                 loss: Callable[[str, str], bool] | None = None) -> None:
        self.target, self.actor, self.worker = target, actor, worker
        self.recorder = recorder
        self.loss = loss
        self.facts: dict[str, dict[str, Any]] = {}  # fact id -> what a return's input must name
        self.dropped = 0  # answers this transport lost on purpose

    def _input(self, method: str, path: str, body: bytes | None) -> dict[str, Any] | None:
        """The ledger model's input for a handoff request (None: not a per-handoff operation)."""
        parts = path.split("?", 1)[0].split("/")
        if len(parts) < 6 or parts[4] != "handoffs":
            return None
        if method == "GET" and len(parts) == 6:
            return {"op": "handoff.status", "actor": self.actor, "handoff_id": parts[5]}
        if method != "POST" or len(parts) != 7 or parts[6] not in ("accept", "heartbeat", "return"):
            return None
        try:
            doc = loads(body or b"{}")
        except ValueError:  # a request the campaign did not plan: no operation of the model
            return None
        payload = doc.get("payload") if isinstance(doc, dict) else None
        if not isinstance(payload, dict):
            return None
        return {"op": f"handoff.{parts[6]}", "actor": self.actor, "handoff_id": parts[5],
                "command_id": doc.get("command_id"), "expected_revision": doc.get("expected_revision"),
                "payload": payload, "now_ms": self.target.now_ms(),
                "fact": self.facts.get(str(payload.get("result_fact_id")))}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        method, path, body = request.method, request.url.raw_path.decode("ascii"), request.read() or None
        scheduler = self.target.scheduler
        if scheduler is not None:
            scheduler.point("request")
        inp = self._input(method, path, body) if self.recorder is not None else None
        ticket = None if inp is None or self.recorder is None else self.recorder.invoke(
            self.worker, {**inp, "request": {"method": method, "path": path}})
        try:
            reply = self.target.request(self.actor, method, path, body)
        except Lost as exc:
            if ticket is not None and self.recorder is not None:
                (self.recorder.unknown if exc.delivered else self.recorder.fail)(ticket)
            raise httpx.ReadError(str(exc), request=request) from None
        finally:
            if scheduler is not None:
                scheduler.point("done")
        if self.loss is not None and self.loss(method, path):
            self.dropped += 1
            if ticket is not None and self.recorder is not None:
                self.recorder.unknown(ticket)  # applied, answer lost: it may have happened
            raise httpx.ReadError("answer dropped by the simulator after the target applied it", request=request)
        if ticket is not None and self.recorder is not None and inp is not None:
            self.recorder.ok(ticket, output_of(reply, PlannedOp(worker=self.worker, input=inp, method=method,
                                                                path=path, body=None)))
        return httpx.Response(reply.status, content=reply.body, headers={"content-type": "application/json"},
                              request=request)


@dataclass(slots=True)
class _Outcome:
    """What one worker's calls answered, for the client-side judge."""

    accepts: list[tuple[str, bool]] = field(default_factory=list)  # (claim, recovered)
    doubts: int = 0  # calls that ended in doubt and were run again
    broken: list[str] = field(default_factory=list)  # what the client raised besides its own errors


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRun:
    seed: int
    history: tuple[Operation, ...]
    finding: Finding | None
    client_findings: tuple[str, ...]
    rounds: int
    dropped: int  # answers lost after the target applied them (each retried once, identically)
    doubts: int  # calls whose retry was lost too, so the worker ran the call again
    elapsed_s: float

    @property
    def clean(self) -> bool:
        return self.finding is None and not self.client_findings


def _call(outcome: _Outcome, action: Callable[[], Any], settle: Callable[[], None] | None = None) -> Any:
    """Run a client call; after an outcome in doubt, or a write that lost a race (409
    stale_revision), run the same call again, as a user reruns a command. ``settle`` runs before
    a rerun after doubt (a fault campaign waits there until a killed server is back)."""
    for _ in range(_RERUNS):
        try:
            return action()
        except OutcomeUnknown:
            outcome.doubts += 1
            if settle is not None:
                settle()
        except AideMemoHTTPError as exc:
            if exc.code != "stale_revision":
                return exc  # an answer: recorded in the history, judged by the model
        except AideMemoClientError as exc:
            return exc
        except Exception as exc:  # the client broke on an answer it could not read: its finding, not a crash
            outcome.broken.append(f"{type(exc).__name__}: {exc}")
            return exc
    return None


def _worker_script(client: AideMemoClient, handoff_id: str, fact_id: str, rng: random.Random,
                   outcome: _Outcome, settle: Callable[[], None] | None = None) -> None:
    """Accept then return, each maybe twice; sometimes a failed return first, then a new attempt.
    Every script ends with a succeeded return, so every handoff must end completed."""
    outcomes = (["failed"] if rng.random() < 0.5 else []) + ["succeeded"]
    for final in outcomes:
        for _ in range(1 + (rng.random() < 0.5)):
            accepted = _call(outcome, lambda: client.accept(handoff_id), settle)
            if isinstance(accepted, dict):
                outcome.accepts.append((accepted["claim_id"], accepted["recovered"]))
        for _ in range(1 + (rng.random() < 0.5)):
            _call(outcome, lambda: client.return_result(handoff_id, fact_id, final), settle)


def _judge(target: Target, handoff_id: str, receiver: str, outcomes: list[_Outcome],
           history: list[Operation]) -> list[str]:
    """The client's promise against what the server committed for one handoff."""
    problems: list[str] = []
    base = f"/v1/projects/{target.project}/handoffs/{handoff_id}"
    problems += [f"{handoff_id}: the client raised {broken} (an answer it could not read is an error it raises, "
                 "never a crash)" for outcome in outcomes for broken in outcome.broken[:1]]
    reply = target.request(receiver, "GET", base)
    doc = reply.json() if reply.status == 200 else {"record": {}}
    record = doc.get("record") if isinstance(doc, dict) else None
    if not isinstance(record, dict):
        return [*problems, f"{handoff_id}: GET {base} answered {reply.status} with no record object: "
                           f"{reply.body[:200]!r}"]
    count = record.get("attempt_count")
    attempts = count if isinstance(count, int) else 0
    claims = {stable_claim_id(target.project, receiver, handoff_id, n): n for n in range(1, attempts + 2)}
    for outcome in outcomes:
        for claim, _ in outcome.accepts:
            if claims.get(claim, 10**9) > attempts:
                problems.append(f"{handoff_id}: an accept answered claim {claim[:16]}..., which no attempt on the"
                                f" server derives (attempt_count {record.get('attempt_count')})")
    # One intent, one transition: each distinct (op, claim[, evidence]) committed at most one revision.
    committed: dict[tuple[str, ...], set[int]] = {}
    for op in history:
        if op.input.get("handoff_id") != handoff_id or op.output is None or op.output.get("http") != 200:
            continue
        if op.input.get("op") in ("handoff.accept", "handoff.return"):
            payload = op.input["payload"]
            assert isinstance(payload, dict)
            intent = (str(op.input["op"]), *(str(payload.get(k)) for k in ("claim_id", "result_fact_id", "outcome")))
            revision = op.output.get("revision")
            if isinstance(revision, int):
                committed.setdefault(intent, set()).add(revision)
    for intent, revisions in sorted(committed.items()):
        if len(revisions) > 1:
            problems.append(f"{handoff_id}: {intent[0]} with claim {intent[1][:16]}... committed {len(revisions)}"
                            f" transitions (revisions {sorted(revisions)}); a retry or rerun must converge on one")
    if record.get("status") != "completed":
        problems.append(f"{handoff_id}: every worker finished with a succeeded return, yet it reads"
                        f" {record.get('status')}")
    return problems


def _send(target: Target, recorder: Recorder, run_id: str, index: int) -> str:
    """One handoff from the first actor to the second, recorded as the planner records sends."""
    sender, receiver = target.actors[0], target.actors[1]
    handoff_id = f"handoff-client-{run_id}-{index}"
    command_id = f"{run_id}-send-{index}"
    payload = {"handoff_id": handoff_id, "session_id": f"{SESSION_ID}-{run_id}", "to_actor": receiver}
    inp = {"op": "handoff.send", "actor": sender, "handoff_id": handoff_id, "command_id": command_id,
           "payload": payload, "session": {"source_id": SOURCE}, "receiver_writable": True}
    op = PlannedOp(worker=0, input=inp, method="POST", path=f"/v1/projects/{target.project}/handoffs",
                   body={"command_id": command_id, "payload": payload})
    ticket = recorder.invoke(0, inp)
    reply = target.request(sender, op.method, op.path, json.dumps(op.body).encode())
    recorder.ok(ticket, output_of(reply, op))
    return handoff_id


@dataclass(slots=True)
class _Rounds:
    """What the rounds of one campaign share, and what they found so far."""

    target: Target
    seed: int
    run_id: str
    workers: int
    loss: float
    client_class: ClientClass
    settle: Callable[[], None] | None
    recorder: Recorder = field(default_factory=Recorder)
    client_findings: list[str] = field(default_factory=list)
    doubts: int = 0
    dropped: int = 0

    def race(self, index: int, handoff_id: str) -> list[_Outcome]:
        """The round's ``workers`` clients of the receiver race on ``handoff_id``."""
        target, receiver = self.target, self.target.actors[1]
        rng = random.Random(batch_seed(self.seed, index))
        outcomes = [_Outcome() for _ in range(self.workers)]
        losses, lock = random.Random(rng.getrandbits(64)), threading.Lock()

        def lose(method: str, path: str) -> bool:
            with lock:
                return method == "POST" and losses.random() < self.loss

        scripts = [random.Random(rng.getrandbits(64)) for _ in range(self.workers)]
        scheduler = target.scheduler
        if scheduler is not None:
            scheduler.reset(batch_seed(self.seed, 1_000 + index))
            scheduler.expect(self.workers)
        errors: list[BaseException] = []
        transports = [TargetTransport(target, receiver, worker + 1, recorder=self.recorder, loss=lose)
                      for worker in range(self.workers)]
        fact_id = f"fact-{receiver}-{self.run_id}"  # setup's fact of the receiver, in the run's session
        fact = {"session_id": f"{SESSION_ID}-{self.run_id}", "source_id": SOURCE, "actor_id": receiver}

        def lane(worker: int) -> None:
            transport = transports[worker]
            transport.facts[fact_id] = fact
            try:
                if scheduler is not None:
                    scheduler.enter(worker + 1)
                with self.client_class(str(getattr(target, "url", "http://sim")), "sim", target.project,
                                       transport=transport) as client:
                    _worker_script(client, handoff_id, fact_id, scripts[worker], outcomes[worker], self.settle)
            except BaseException as exc:  # surfaced in the caller's thread
                errors.append(exc)
            finally:
                if scheduler is not None:
                    scheduler.leave()

        threads = [threading.Thread(target=lane, args=(w,), daemon=True) for w in range(self.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        if errors:
            raise errors[0]
        self.doubts += sum(o.doubts for o in outcomes)
        self.dropped += sum(t.dropped for t in transports)
        return outcomes


def run_client_campaign(target: Target, *, seed: int, run_id: str, rounds: int = 3, workers: int = 3,
                        loss: float = 0.3, client_class: ClientClass = AideMemoClient,
                        budget_s: float = 20.0, on_round: Callable[[float, int], None] | None = None,
                        hooks: BatchHooks | None = None, settle: Callable[[], None] | None = None) -> ClientRun:
    """``rounds`` handoffs from the first actor to the second, each taken by ``workers`` racing
    clients of the receiver through a target that loses ``loss`` of the POST answers it applied.
    ``on_round(seconds since start, operations so far)`` hears about every round (a hunt's shard
    publishes its counts with it). ``hooks`` hear of each round once its handoff is sent and
    after its clients ended, before it is judged (a fault campaign's nemesis: True from ``after``
    stops the run); ``settle`` runs before a worker reruns a call that ended in doubt."""
    started = time.monotonic()
    setup(target, run_id)
    state = _Rounds(target, seed, run_id, workers, loss, client_class, settle)
    done = 0
    for index in range(rounds):
        handoff_id = _send(target, state.recorder, run_id, index)
        if hooks is not None:
            hooks.before(index)
        outcomes = state.race(index, handoff_id)
        stop = hooks is not None and hooks.after(index)
        state.client_findings += _judge(target, handoff_id, target.actors[1], outcomes, state.recorder.history())
        done += 1
        if on_round is not None:
            on_round(time.monotonic() - started, len(state.recorder.history()))
        if stop:
            break
    history = state.recorder.history()
    _, finding = check_history(history, budget_s)
    return ClientRun(seed=seed, history=tuple(history), finding=finding, client_findings=tuple(state.client_findings),
                     rounds=done, dropped=state.dropped, doubts=state.doubts, elapsed_s=time.monotonic() - started)
