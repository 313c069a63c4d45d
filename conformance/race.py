"""Run requests at the same instant from threads: how checks provoke races on a live target."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence

from conformance.errors import Indeterminate, TargetError
from conformance.http import Exchange

__all__ = ["next_group", "race", "race_lanes"]

_GROUPS = itertools.count(1)  # names each race's requests as one group in the transcript (reproductions)


def next_group() -> int:
    """A new concurrency group's number: the transcript entries of one race share it."""
    return next(_GROUPS)


def race(calls: Sequence[Callable[[], Exchange]]) -> list[Exchange]:
    """Start every call behind one barrier; return their answers in call order.

    Raises:
        Indeterminate: a contender got only ``503 storage_failure`` answers (not a verdict).
        TargetError: a contender got no well-formed answer.
    """
    return [answers[0] for answers in race_lanes([_lane_of(call) for call in calls])]


def _lane_of(call: Callable[[], Exchange]) -> Callable[[], list[Exchange]]:
    return lambda: [call()]


def race_lanes(lanes: Sequence[Callable[[], list[Exchange]]]) -> list[list[Exchange]]:
    """Start every lane behind one barrier, a lane sending its requests one after another while
    the others' are in flight; return each lane's answers, in lane order. Errors as ``race``'s."""
    answers: list[list[Exchange] | TargetError | Indeterminate | None] = [None] * len(lanes)
    barrier = threading.Barrier(len(lanes))

    def run(index: int) -> None:
        barrier.wait()
        try:
            answers[index] = lanes[index]()
        except (TargetError, Indeterminate) as exc:
            answers[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(lanes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for answer in answers:
        if isinstance(answer, Indeterminate):
            raise Indeterminate(f"a contender got only 503 storage_failure answers: {answer}")
    done: list[list[Exchange]] = []
    group = next_group()
    for index, answer in enumerate(answers):
        if not isinstance(answer, list):
            raise answer or AssertionError("a contender did not run")
        for exchange in answer:
            exchange.group.append(group)
            if len(answer) > 1:  # a lane of one is a contender like the others
                exchange.lane.append(index)
        done.append(answer)
    return done
