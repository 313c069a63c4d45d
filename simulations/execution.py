"""Running a batch: its requests launched at once from their workers, every answer recorded.

Each worker (a thread acting as one actor) sends its requests in order; every request is
recorded as invoke, then ok or unknown, with monotonic times, into a ``Recorder``. On the
embedded reference the target's ``SeededScheduler`` decides who runs at each point; over a URL
the network does.

An indeterminate outcome (lost answer, 5xx) is resolved where the protocol allows: the
identical command is sent again, and its answer (the stored receipt, or a refusal) stands for
the pair, over the interval from the first call to the last answer. If that is lost too the
operation stays unknown. Reads are not retried.

``run_lanes`` (the workers and the scheduler) and ``settle`` (one request's outcome, with its
retry) know nothing of AideMemo: the XMemo races run on them too.
"""

from __future__ import annotations

import functools
import json
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from aidememo_wire.shapes import error_detail
from simulations.errors import SimulationError
from simulations.linearizability.history import Recorder
from simulations.plan import Batch, PlannedOp
from simulations.scheduler import SeededScheduler
from simulations.targets import Lost, Reply, Target

__all__ = ["RETRYABLE", "execute_batch", "output_of", "run_lanes", "settle"]

A = TypeVar("A")  # an answer, as the protocol's client returns it

RETRYABLE = frozenset({500, 502, 503, 504})
_RECORD_FIELDS = ("status", "claim_id", "attempt_count", "result_fact_id", "outcome")
_STALL_S = 120  # a worker still busy after this long means the target stalled


def output_of(reply: Reply, op: PlannedOp) -> dict[str, Any]:
    """What the checker sees of an answer: status, error code, revision, receipt or record.

    The parsed body itself is not kept: nothing reads it after checking, and a campaign would
    hold one per operation for its whole run (a read's answer is the handoff's whole record).
    """
    doc = reply.json()
    out: dict[str, Any] = {"http": reply.status, "code": None}
    detail = error_detail(doc)
    if detail is not None:
        out["code"] = detail["code"]
    elif reply.status == 200 and isinstance(doc, dict):
        out["revision"] = doc.get("revision")
        if op.method == "GET" and isinstance(doc.get("record"), dict):
            rec = doc["record"]
            out["record"] = {k: rec.get(k) for k in _RECORD_FIELDS}
        else:
            out["receipt"] = doc
    return out


def _perform(target: Target, op: PlannedOp, recorder: Recorder, client_id: int, sent: list[dict[str, Any]]) -> None:
    body = None if op.body is None else json.dumps(op.body).encode()
    recorded = {**op.input, "request": {"method": op.method, "path": op.path}}
    sent.append(recorded)
    ticket = recorder.invoke(client_id, recorded)
    settle(recorder, ticket, lambda: target.request(op.actor, op.method, op.path, body),
           status=lambda reply: reply.status, output=lambda reply: output_of(reply, op), retry=op.method == "POST")


def settle(recorder: Recorder, ticket: int, send: Callable[[], A], *, status: Callable[[A], int],
           output: Callable[[A], Mapping[str, object]], retry: bool) -> None:
    """Send one request and record how it ended; an indeterminate end is sent once more if ``retry``.

    ``send`` raises ``Lost`` when no complete answer came. An answer with a status outside
    ``RETRYABLE`` is recorded as ``output(answer)``; otherwise, after the retry if any, the
    operation is unknown when some attempt may have reached the target and failed (never took
    effect) when none did.
    """
    delivered = False  # could any attempt have reached the target?
    for attempt in (1, 2):
        try:
            answer: A | None = send()
        except Lost as exc:
            answer, delivered = None, delivered or exc.delivered
        if answer is not None and status(answer) not in RETRYABLE:
            recorder.ok(ticket, output(answer))
            return
        delivered = delivered or answer is not None
        if not retry or attempt == 2:
            break
        # Indeterminate: the identical request again; the protocol's replay rule settles it.
    if delivered:
        recorder.unknown(ticket)
    else:
        recorder.fail(ticket)  # provably never took effect: nothing to check


class _LaneThreads:
    """Threads that outlive their batch: a lane takes an idle one, or starts one when none is idle.

    Batch after batch on the same few threads, the store's per-thread state (its SQLite
    connection, that connection's page cache, the authentication answers it remembers and its
    ``data_version`` baseline) stays warm, and the threads, hence the connections, number the
    peak concurrency, not the batches run. Daemon threads: a target that stalls one cannot hang
    the interpreter's exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def start(self, job: Callable[[], None]) -> threading.Event:
        """Run ``job`` on a thread of its own; the event is set when it returned."""
        done = threading.Event()
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), daemon=True, name="aidememo-sim-lane").start()

        def run() -> None:
            try:
                job()
            finally:
                done.set()
        inbox.put(run)
        return done

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            inbox.get()()  # a lane's job catches everything it raises
            with self._lock:
                self._idle.append(inbox)


_LANES = _LaneThreads()


def run_lanes(batch: Batch, perform: Callable[[PlannedOp, int], None], scheduler: SeededScheduler | None,
              seed: int, script: Sequence[int] = ()) -> list[int]:
    """Launch ``batch`` at once, one thread per busy worker, each calling ``perform(op, worker)``
    for its operations in order; returns the scheduler's decisions.

    With a scheduler (the embedded targets) it is reset to ``seed`` and ``script`` and decides
    who runs at each point; without one a barrier releases the workers together.

    Raises:
        SimulationError: when a worker stalls or fails outside the request it was sending.
    """
    if scheduler is not None:
        scheduler.reset(seed, script)
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
                perform(op, worker)
                if scheduler is not None:
                    scheduler.point("done")
        except BaseException as exc:  # surfaced below, in the caller's thread
            errors.append(exc)
        finally:
            if scheduler is not None:
                scheduler.leave()

    finished = [_LANES.start(functools.partial(lane, w, ops)) for w, ops in sorted(lanes.items())]
    try:
        for done in finished:
            if not done.wait(timeout=_STALL_S):
                raise SimulationError(f"a worker did not finish within {_STALL_S} s; the target stalled")
    except KeyboardInterrupt:  # let the lanes finish their batch before the caller closes the target under them
        for done in finished:
            done.wait(timeout=_STALL_S)
        raise
    if errors:
        if isinstance(errors[0], SimulationError):
            raise errors[0]
        raise SimulationError(f"a worker failed: {errors[0]!r}") from errors[0]
    return list(scheduler.decisions) if scheduler is not None else []


def execute_batch(target: Target, batch: Batch, recorder: Recorder, seed: int,
                  script: Sequence[int] = ()) -> list[int]:
    """Set the target's clock to the batch's, then run it (``run_lanes``) against ``target``.

    Over a URL the server's clock is read again after the batch, and the batch's inputs say the
    server's time lay between the two readings (``now_ms`` .. ``now_max_ms``, as ``ledger.py``
    models it): wall time passes during a batch, and a test clock the server shares with other
    clients (another shard of a hunt) can move under it or before it. A server without the test
    clock gets this process's wall clock, read around the batch, instead.

    Raises:
        SimulationError: when a worker stalls or fails outside the request it was sending.
    """
    windowed = target.scheduler is None  # the embedded targets' clock moves only when told
    if batch.clock_ms is not None:
        now = target.set_clock(batch.clock_ms)
        if windowed and now is not None and now != batch.clock_ms:
            batch = batch.at(now)  # the server is past the plan's time: the model is told the server's
    sent: list[dict[str, Any]] = []
    wall = _wall_ms()
    decisions = run_lanes(batch, lambda op, worker: _perform(target, op, recorder, worker, sent),
                          target.scheduler, seed, script)
    if not windowed:
        return decisions
    # Before anything takes the batch from the recorder: the inputs stamped are the recorded ones.
    if batch.clock_ms is not None:
        after = target.now_ms()
        if after is not None and after > batch.clock_ms:
            for recorded in sent:
                if recorded.get("now_ms") is not None:
                    recorded["now_max_ms"] = after
    else:
        # No test clock: the server's leases run on its wall clock, which runs at this process's
        # rate; a lease compares two times of one clock, so this process's clock, read around the
        # batch, serves (its offset from the server's cancels). Its receipts' times are the
        # server's, so the model never takes them for this clock's (``clock: wall``).
        after = _wall_ms()
        for recorded in sent:
            if "now_ms" in recorded:
                recorded.update(now_ms=wall, now_max_ms=after, clock="wall")
    return decisions


def _wall_ms() -> int:
    return time.monotonic_ns() // 1_000_000
