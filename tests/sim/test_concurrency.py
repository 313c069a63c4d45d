"""Indeterminate outcomes, the receipt checks, and the scheduler, on the embedded reference."""

from __future__ import annotations

import random

import httpx

from simulations.checker import Verdict
from simulations.concurrency import EmbeddedTarget, Planner, execute_batch, receipt_violations, setup
from simulations.history import Operation, Recorder
from simulations.runner import _workers, check_history


class _LossyTransport(httpx.BaseTransport):
    """Executes the request, then loses the answer: for every ``every``-th POST, or for all."""

    def __init__(self, inner: httpx.BaseTransport, every: int, lose_retries: bool) -> None:
        self.inner, self.every, self.lose_retries = inner, every, lose_retries
        self.posts = 0
        self.lost: set[bytes] = set()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method != "POST":
            return response
        body = request.content
        self.posts += 1
        if body in self.lost and self.lose_retries:
            raise httpx.ReadTimeout("lost again", request=request)
        if self.posts % self.every == 0:
            self.lost.add(body)
            raise httpx.ReadTimeout("answer lost after the command ran", request=request)
        return response


def _campaign(lose_retries: bool) -> tuple[list[Operation], int]:
    actors = ("agent-a", "agent-b", "agent-c")
    target = EmbeddedTarget(actors, seed=1)
    workers = _workers(actors)
    try:
        setup(target, "r")
        lossy = []
        for actor in actors:
            client = target.client(actor)
            transport = _LossyTransport(client._transport, every=4, lose_retries=lose_retries)
            client._transport = transport
            lossy.append(transport)
        planner = Planner(target=target, run_id="r", rng=random.Random(1), workers=workers)
        recorder = Recorder()
        for index in range(20):
            planner.refresh()
            execute_batch(target, workers, planner.next_batch(), recorder, index)
        return recorder.history(), sum(len(t.lost) for t in lossy)
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
