"""Hypothesis state machines: a ledger and the model side by side, one step at a time.

One machine per kind of traffic, each reporting its invariants by name:

* ``HandoffLifecycle`` (``lifecycle.py``): every write by every actor;
* ``ConcurrentSenders``, ``RacingAccepters``, ``StaleWriters`` (``races.py``): the races STYLE.md
  names, as interleavings of read-then-write processes;
* ``ActorVisibility`` (``visibility.py``): what each actor may see, one invariant per read path.

They run against the embedded reference by default (a fresh ledger per example, on a manual
clock, reached without HTTP) or any server by URL (``bound_to(machine, lambda:
Wire.over_http(...))``). Their record invariants are in ``base.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from simulations.machines.base import LedgerMachine
from simulations.machines.lifecycle import HandoffLifecycle
from simulations.machines.races import ConcurrentSenders, RacingAccepters, StaleWriters
from simulations.machines.visibility import ActorVisibility
from simulations.machines.wire import ACTORS, WRITERS, Wire

__all__ = ["ACTORS", "MACHINES", "WRITERS", "ActorVisibility", "ConcurrentSenders", "HandoffLifecycle",
           "LedgerMachine", "RacingAccepters", "StaleWriters", "Wire", "bound_to"]

MACHINES: tuple[type[LedgerMachine], ...] = (
    HandoffLifecycle, ConcurrentSenders, RacingAccepters, StaleWriters, ActorVisibility)


def bound_to(machine: type[LedgerMachine], wire: Callable[[], Wire]) -> type[LedgerMachine]:
    """``machine`` against another ledger: a URL, or a variant of the reference."""
    bound = type(machine.__name__, (machine,), {"wire_factory": staticmethod(wire)})
    bound.__qualname__ = machine.__qualname__
    return bound
