"""State-machine steps per second on the embedded reference, beside the model alone."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, run_state_machine_as_test

from simulations.machines import MACHINES
from simulations.machines.base import LedgerMachine
from simulations.machines.wire import ACTORS, WRITERS
from simulations.model import Command, LedgerState, Op, apply

__all__ = ["bench_machines"]

# Untyped in hypothesis releases before 6.170.x: a typed name keeps mypy --strict clean on both.
_run_as_test: Callable[..., None] = run_state_machine_as_test


def _steps_per_s(machine: type[LedgerMachine], steps: int) -> tuple[int, float, float]:
    """(steps, wall seconds, CPU seconds of this process): on a shared machine the CPU time is
    the fairer figure, the wall time the one a test run feels."""
    counted = {"steps": 0}

    class Counted(machine):  # type: ignore[valid-type, misc]
        @invariant()
        def count_steps(self) -> None:  # invariants run once after each step (and after setup)
            counted["steps"] += 1

    started, cpu = time.perf_counter(), time.process_time()
    _run_as_test(Counted, settings=settings(
        max_examples=max(1, steps // 25), stateful_step_count=25, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck)))
    return counted["steps"], time.perf_counter() - started, time.process_time() - cpu


def _model_alone(writes: int, seed: int) -> float:
    """The model's time for ``writes`` sends, in examples of the machines' length (25 steps
    from a fresh state), so both sides work on states of the same size."""
    rng = random.Random(seed)
    fresh = LedgerState()
    for actor in ACTORS:
        fresh = fresh.with_member(actor, "writer")
    started = time.perf_counter()
    for n in range(writes):
        if n % 25 == 0:
            _, state = apply(fresh, Command(actor="agent-a", operation=Op.SESSION_CREATE, command_id=f"s{n}",
                                            resource_id="s", payload={"session_id": "s", "source_id": None,
                                                                      "topic": "t"}))
        actor, receiver = rng.sample(WRITERS, 2)
        _, state = apply(state, Command(actor=actor, operation=Op.SEND, command_id=f"c{n + 1}",
                                        resource_id=f"h{n}", payload={"handoff_id": f"h{n}", "session_id": "s",
                                                                      "to_actor": receiver}))
    return time.perf_counter() - started


def bench_machines(steps: int, seed: int) -> None:
    """Print each machine's steps per second (wall and CPU), beside the model alone as the baseline."""
    for machine in MACHINES:
        count, took, cpu = _steps_per_s(machine, steps)
        base = _model_alone(count, seed)
        print(f"state machine {machine.__name__}: {count} steps in {took:.2f} s = {count / took:.0f} steps/s "
              f"({count / max(cpu, 1e-9):.0f} per CPU second; each step: its writes, then the invariants' "
              f"reads); the model alone: {count / max(base, 1e-9):.0f} steps/s; ratio {took / max(base, 1e-9):.0f}x")
