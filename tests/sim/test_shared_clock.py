"""A server's test clock is the server's, not the campaign's: other clients move it too.

Shards of a hunt against one server share its ``/__test__/clock``; each moves it, so the others'
leases expire on a clock they did not move. A correct server then answers a heartbeat 200 where
the campaign's planned time says the lease is gone (or 409 where it says it is alive). The
campaign must judge by the server's time, known only to lie between the readings before and
after each batch: modelled at the plan's time alone, these runs accused the correct reference.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aidememo_ref import OffsetClock, ReferenceLedger
from simulations.campaign import check_history
from simulations.execution import execute_batch
from simulations.linearizability.checker import Verdict
from simulations.linearizability.history import Operation, Recorder
from simulations.model import LEASE_MS
from simulations.plan import workers_for
from simulations.planner import Planner, setup
from simulations.scheduler import SeededScheduler
from simulations.targets import HttpTarget, Reply

from .served import served

ACTORS = ("agent-a", "agent-b", "agent-c")


class _Crowded:
    """A URL target whose server clock another client also moves: past the lease, just after
    this campaign set it (``before``) or in the middle of a batch (``during``)."""

    def __init__(self, inner: HttpTarget, rng: random.Random, when: str) -> None:
        self.inner, self.rng, self.when = inner, rng, when
        self.actors, self.project, self.has_reader = inner.actors, inner.project, inner.has_reader
        self.scheduler: SeededScheduler | None = None  # the network interleaves
        self.moves = 0

    def _someone_else_moves_it(self) -> None:
        body = json.dumps({"advance_ms": LEASE_MS + self.rng.choice([1, 500, 5_000])}).encode()
        assert self.inner.request(self.actors[0], "POST", "/__test__/clock", body).status == 200
        self.moves += 1

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        if self.when == "during" and method == "POST" and self.rng.random() < 0.08:
            self._someone_else_moves_it()
        return self.inner.request(actor, method, path, body)

    def now_ms(self) -> int | None:
        return self.inner.now_ms()

    def set_clock(self, now_ms: int) -> int | None:
        now = self.inner.set_clock(now_ms)
        if self.when == "before" and self.rng.random() < 0.3:
            self._someone_else_moves_it()
        return now

    def close(self) -> None:
        self.inner.close()


@contextmanager
def _server(database: Path) -> Iterator[HttpTarget]:
    ledger = ReferenceLedger(database, clock=OffsetClock(), test_clock=True)
    with served(ledger, ACTORS) as (url, tokens):
        yield HttpTarget(url, "p", tokens)


def _heartbeat_answers(history: list[Operation]) -> set[object]:
    return {op.output.get("http") for op in history
            if op.input.get("op") == "handoff.heartbeat" and op.output is not None}


def _campaign(target: _Crowded, batches: int, most: int) -> list[Operation]:
    """``batches`` batches, then more (up to ``most``) until a heartbeat was answered and one refused:
    which happens when depends on how the batches interleave, and a loaded machine once saw no 200
    in the first 60."""
    setup(target.inner, "r")
    planner = Planner(target=target, run_id="r", rng=random.Random(3), workers=workers_for(ACTORS))
    recorder = Recorder()
    for index in range(most):
        if index >= batches and {200, 409} <= _heartbeat_answers(recorder.history()):
            break
        planner.refresh()
        execute_batch(target, planner.next_batch(), recorder, index)
    return recorder.history()


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_clock_moved_by_another_client_is_no_violation_of_a_correct_server(when: str, tmp_path: Path) -> None:
    with _server(tmp_path / "ledger.sqlite") as http:
        target = _Crowded(http, random.Random(5), when)
        try:
            history = _campaign(target, 60, most=300)
        finally:
            target.close()
    assert target.moves >= 5
    # The leases did expire under the campaign: heartbeats were refused as well as answered.
    assert {200, 409} <= _heartbeat_answers(history)
    verdict, finding = check_history(history)
    assert finding is None and verdict is Verdict.OK, None if finding is None else finding.explanation


@pytest.mark.slow  # it waits for leases to run out in real time: seconds of sleep
def test_leases_that_run_out_in_real_time_on_a_server_without_the_test_clock_are_no_violation(
        tmp_path: Path) -> None:
    # Without the test clock a server's leases run on its wall clock. Short leases on both sides
    # (the reference's and the model's), and pauses between batches longer than a lease: a correct
    # server refuses the late heartbeats, and the model, knowing no time, used to expect them taken.
    import time

    lease_ms = 400
    ledger = ReferenceLedger(tmp_path / "ledger.sqlite", lease_ms=lease_ms)  # no test clock
    rng = random.Random(8)
    with served(ledger, ACTORS) as (url, tokens):
        target = HttpTarget(url, "p", tokens)
        try:
            setup(target, "r")
            assert target.now_ms() is None  # the server has no test clock
            planner = Planner(target=target, run_id="r", rng=random.Random(3), workers=workers_for(ACTORS),
                              lease_ms=lease_ms)
            recorder = Recorder()
            for index in range(40):
                planner.refresh()
                execute_batch(target, planner.next_batch(), recorder, index)
                if rng.random() < 0.3:
                    time.sleep((lease_ms + rng.choice([50, 300])) / 1000)
            history = recorder.history()
        finally:
            target.close()
    late = [op for op in history if op.input.get("op") == "handoff.heartbeat" and op.output is not None
            and op.output.get("code") == "handoff_conflict"]
    assert late, "no lease ran out under the campaign"
    verdict, finding = check_history(history)
    assert finding is None and verdict is Verdict.OK, None if finding is None else finding.explanation
