"""Run requests at the same instant from threads: how checks provoke races on a live target."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence

from conformance.errors import Indeterminate, TargetError
from conformance.http import Exchange

__all__ = ["next_group", "race"]

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
    answers: list[Exchange | TargetError | Indeterminate | None] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(index: int) -> None:
        barrier.wait()
        try:
            answers[index] = calls[index]()
        except (TargetError, Indeterminate) as exc:
            answers[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for answer in answers:
        if isinstance(answer, Indeterminate):
            raise Indeterminate(f"a contender got only 503 storage_failure answers: {answer}")
    done: list[Exchange] = []
    group = next_group()
    for answer in answers:
        if not isinstance(answer, Exchange):
            raise answer or AssertionError("a contender did not run")
        answer.group.append(group)
        done.append(answer)
    return done
