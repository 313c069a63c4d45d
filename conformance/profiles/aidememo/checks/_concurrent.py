"""Sending requests at once, for the checks whose requirement is about concurrent traffic."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from conformance.errors import Indeterminate, TargetError

__all__ = ["at_once"]

T = TypeVar("T")


def at_once(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run the calls together (one thread each, released by one barrier); their answers in order.

    Raises:
        TargetError, Indeterminate: the first a call raised, once all are done.
    """
    answers: list[T | Exception | None] = [None] * len(calls)
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
        if isinstance(answer, Exception):
            raise answer
    return answers  # type: ignore[return-value]  # no call raised: every answer is a T
