"""State-machine steps per second on the embedded reference, beside two baselines of the same
run: an empty machine of the same shape (Hypothesis alone) and the model alone."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from simulations.machines import MACHINES
from simulations.machines._hot import lean_applies
from simulations.machines.base import LedgerMachine
from simulations.machines.wire import ACTORS, WRITERS
from simulations.model import Command, LedgerState, Op, apply

__all__ = ["bench_machines", "empty_like"]

# Untyped in hypothesis releases before 6.170.x: a typed name keeps mypy --strict clean on both.
_run_as_test: Callable[..., None] = run_state_machine_as_test
_STEPS = 20  # steps per example, as the default test profile (dev) runs them
_PAIRS = 3  # runs of the slowest machine with and without _hot's invariant loop


def empty_like(machine: type[LedgerMachine]) -> type[Any]:
    """A machine with ``machine``'s rules (their strategies, bundles and targets), as many
    invariants, and bodies that do nothing: what Hypothesis alone costs for that shape. It has
    no preconditions (they read the machine's state), so every rule stays enabled."""
    members: dict[str, Any] = {}
    made = iter(range(1 << 62))

    def made_one(self: Any, **_: Any) -> int:
        return next(made)

    def did_nothing(self: Any, **_: Any) -> None:
        return None

    for name in dir(machine):
        member = getattr(machine, name)
        for marker, decorate in (("hypothesis_stateful_rule", rule), ("hypothesis_stateful_initialize_rule",
                                                                       initialize)):
            found = getattr(member, marker, None)
            if found is not None:
                targets = [Bundle(t) for t in found.targets]
                members[name] = decorate(targets=targets, **found.arguments)(
                    made_one if targets else did_nothing)
        if getattr(member, "hypothesis_stateful_invariant", None) is not None:
            members[name] = invariant()(lambda self: None)
    return type(f"Empty{machine.__name__}", (RuleBasedStateMachine,), members)


def _steps_per_s(machine: type[Any], steps: int) -> tuple[int, float, float]:
    """(steps, wall seconds, CPU seconds of this process): on a shared machine the CPU time is
    the fairer figure, the wall time the one a test run feels."""
    counted = {"steps": 0}

    class Counted(machine):  # type: ignore[misc]
        @invariant()
        def count_steps(self) -> None:  # invariants run once after each step (and after setup)
            counted["steps"] += 1

    started, cpu = time.perf_counter(), time.process_time()
    _run_as_test(Counted, settings=settings(
        max_examples=max(1, steps // _STEPS), stateful_step_count=_STEPS, deadline=None, derandomize=True,
        database=None, suppress_health_check=list(HealthCheck)))
    return counted["steps"], time.perf_counter() - started, time.process_time() - cpu


def _model_alone(writes: int, seed: int) -> float:
    """The model's time for ``writes`` sends, in examples of the machines' length (``_STEPS``
    steps from a fresh state), so both sides work on states of the same size."""
    rng = random.Random(seed)
    fresh = LedgerState()
    for actor in ACTORS:
        fresh = fresh.with_member(actor, "writer")
    started = time.perf_counter()
    for n in range(writes):
        if n % _STEPS == 0:
            _, state = apply(fresh, Command(actor="agent-a", operation=Op.SESSION_CREATE, command_id=f"s{n}",
                                            resource_id="s", payload={"session_id": "s", "source_id": None,
                                                                      "topic": "t"}))
        actor, receiver = rng.sample(WRITERS, 2)
        _, state = apply(state, Command(actor=actor, operation=Op.SEND, command_id=f"c{n + 1}",
                                        resource_id=f"h{n}", payload={"handoff_id": f"h{n}", "session_id": "s",
                                                                      "to_actor": receiver}))
    return time.perf_counter() - started


def _load() -> str:
    """The 1-minute load average; above 1 a 2-core machine is shared, and the figure says so."""
    load = os.getloadavg()[0]
    return f"{load:.2f}" + (" (busy: above 1)" if load > 1 else "")


def _bytecode() -> str:
    """Whether the machines' modules were loaded from cached bytecode (never where
    PYTHONDONTWRITEBYTECODE is set and no __pycache__ holds them)."""
    cached = any((Path(__file__).parent / "__pycache__").glob("visibility.*.pyc"))
    return f"bytecode cached: {'yes' if cached else 'no'}"


def bench_machines(steps: int, seed: int) -> None:
    """Print each machine's steps per second (wall and CPU) beside the same run's baselines: the
    empty machine of its shape and the model alone; each with the load at its start and end."""
    print(f"state machines: {steps} steps each, {_STEPS} per example, derandomized; load {_load()} at start; "
          f"{_bytecode()}")
    started = time.perf_counter()
    _steps_per_s(MACHINES[0], _STEPS)  # once per process, as in a test run: imports, the embedded ledger
    print(f"  start-up (imports, the embedded ledger, one example): {time.perf_counter() - started:.2f} s, "
          f"not counted below")
    for machine in MACHINES:
        load_at_start = _load()
        count, took, cpu = _steps_per_s(machine, steps)
        empty, _, empty_cpu = _steps_per_s(empty_like(machine), steps)
        base = _model_alone(count, seed)
        print(f"  {machine.__name__}: {count} steps in {took:.2f} s = {count / took:.0f} steps/s, "
              f"{count / max(cpu, 1e-9):.0f} per CPU second; the empty machine of its shape "
              f"{empty / max(empty_cpu, 1e-9):.0f} per CPU second; the model alone "
              f"{count / max(base, 1e-9):.0f} steps/s; load {load_at_start} at start, {_load()} at end")
    _shortcut_figure(MACHINES[-1], steps)


def _shortcut_figure(machine: type[LedgerMachine], steps: int) -> None:
    """The machine again with Hypothesis's own invariant loop, the figure behind ``_hot``'s
    shortcut (the same steps are drawn either way)."""
    if not lean_applies():
        print(f"  ({machine.__name__}: the installed Hypothesis is not the one _hot's invariant loop was written "
              "against, so the machines run Hypothesis's own)")
        return
    load_at_start = _load()
    plain_machine = type(machine.__name__, (machine,), {"lean": False})
    best: dict[bool, float] = {}
    for _ in range(_PAIRS):  # interleaved, the best of each: a loaded machine's CPU time varies run to run
        for lean, which in ((True, machine), (False, plain_machine)):
            count, _, cpu = _steps_per_s(which, steps)
            best[lean] = max(best.get(lean, 0.0), count / max(cpu, 1e-9))
    print(f"  {machine.__name__}, _hot's invariant loop: {best[True]:.0f} per CPU second; with Hypothesis's own: "
          f"{best[False]:.0f} (best of {_PAIRS} each, interleaved); load {load_at_start} at start, {_load()} at end")
