"""Indeterminate outcomes, the receipt checks, and the scheduler, on the embedded reference."""

from __future__ import annotations

import random

from simulations.campaign import check_history
from simulations.linearizability.checker import Verdict
from simulations.execution import execute_batch
from simulations.linearizability.history import Operation, Recorder
from simulations.plan import workers_for
from simulations.planner import Planner, setup
from simulations.receipts import receipt_violations
from simulations.targets import EmbeddedTarget, Lost, Reply


class _Lossy:
    """The embedded target, losing the answer of every ``every``-th write after it ran."""

    def __init__(self, inner: EmbeddedTarget, every: int, lose_retries: bool) -> None:
        self.inner, self.every, self.lose_retries = inner, every, lose_retries
        self.actors, self.project, self.has_reader = inner.actors, inner.project, inner.has_reader
        self.scheduler = inner.scheduler
        self.posts = 0
        self.lost: set[bytes] = set()

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        reply = self.inner.request(actor, method, path, body)
        if method != "POST" or body is None:
            return reply
        self.posts += 1
        if body in self.lost and self.lose_retries:
            raise Lost("lost again")
        if self.posts % self.every == 0:
            self.lost.add(body)
            raise Lost("answer lost after the command ran")
        return reply

    def now_ms(self) -> int | None:
        return self.inner.now_ms()

    def set_clock(self, now_ms: int) -> int | None:
        return self.inner.set_clock(now_ms)

    def close(self) -> None:
        self.inner.close()


def _campaign(lose_retries: bool) -> tuple[list[Operation], int]:
    actors = ("agent-a", "agent-b", "agent-c")
    target = _Lossy(EmbeddedTarget(actors, seed=1), every=4, lose_retries=lose_retries)
    workers = workers_for(actors)
    try:
        setup(target.inner, "r")
        planner = Planner(target=target, run_id="r", rng=random.Random(1), workers=workers)
        recorder = Recorder()
        for index in range(20):
            planner.refresh()
            execute_batch(target, planner.next_batch(), recorder, index)
        return recorder.history(), len(target.lost)
    finally:
        target.close()


def test_lost_answers_are_resolved_by_replaying_the_identical_command() -> None:
    history, lost = _campaign(lose_retries=False)
    assert lost > 5
    assert not any(op.unknown for op in history)  # every loss was settled by the retry
    verdict, finding = check_history(history)
    assert finding is None and verdict is Verdict.OK


def test_answers_lost_twice_stay_unknown_and_any_result_is_allowed() -> None:
    history, lost = _campaign(lose_retries=True)
    unknown = [op for op in history if op.unknown]
    assert unknown and all(op.return_ns is None for op in unknown)
    verdict, finding = check_history(history)
    assert finding is None and verdict is Verdict.OK


def _write(client: int, command_id: str, seq: int, call: int, ret: int, revision: int = 1) -> Operation:
    receipt = {"command_id": command_id, "project_seq": seq, "revision": revision}
    return Operation(client=client, input={"op": "handoff.send", "command_id": command_id, "handoff_id": "h"},
                     output={"http": 200, "code": None, "revision": revision, "receipt": receipt},
                     call_ns=call, return_ns=ret)


def test_one_command_with_two_different_receipts_is_a_violation() -> None:
    history = [_write(0, "c1", 1, 0, 10), _write(1, "c1", 2, 20, 30)]
    problems = receipt_violations(history)
    assert problems and "different receipts" in problems[0][1]


def test_project_seq_must_follow_real_time() -> None:
    assert receipt_violations([_write(0, "c1", 1, 0, 10), _write(1, "c2", 2, 20, 30)]) == []
    problems = receipt_violations([_write(0, "c1", 2, 0, 10), _write(1, "c2", 1, 20, 30)])
    assert problems and "committed after" in problems[0][1]
    # Concurrent commands may commit in either order.
    assert receipt_violations([_write(0, "c1", 2, 0, 10), _write(1, "c2", 1, 5, 30)]) == []


def test_project_seq_given_twice_is_a_violation() -> None:
    problems = receipt_violations([_write(0, "c1", 1, 0, 10), _write(1, "c2", 1, 5, 30)])
    assert problems and "given to two commands" in problems[0][1]
