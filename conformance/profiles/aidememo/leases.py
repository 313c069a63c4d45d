"""Lease expiry, observed on a virtual clock or by waiting for real, once for every check.

A lease-expiry check declares how to set up its lease (``after_lease_expiry(arrange)``) and
then asks its world for the state after expiry. How expiry comes depends on the target:

* ``virtual``: the target serves the kit's test-clock extension; the check's own lease is set up
  and the clock moved by the lease length read from the server's answer;
* ``real`` (``--real-time-leases``, also forced where the test clock is served): the first
  check the process runs, whatever it is, sets up the leases of every lease-expiry check the
  process will run (``LeaseWait.begin``); those checks run last (``conformance.schedule``), and
  the steps that need a live lease run at their moment on a thread of their own meanwhile. The
  first lease-expiry check sleeps whatever is left until the last lease has expired (plus a
  margin), and every check then finds its lease expired. The wait overlaps the rest of the run,
  serially and under ``-n`` alike; a lease check nobody set up ahead sets up its siblings and
  sleeps a whole lease (``LeaseWait.run``);
* neither: the checks are not scored.

Timing never trusts the server's clock, only its lease length (``claim_expires_at_ms -
claim_heartbeat_at_ms``): the server stamped the lease between our sending the accept and
reading its answer, so it has surely expired ``lease`` after the answer, and it is surely live
until ``lease`` after the sending. Steps a check needs shortly before expiry (a heartbeat that
must still be accepted) run inside the wait, at their moment.

Ctrl-C during the wait ends it: every check that was waiting reads UNTESTABLE and the run stops
cleanly after the current check (reports are written).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import pytest

from conformance.errors import NotScored, Untestable

__all__ = ["MARKER", "Arranged", "Lease", "LeaseMode", "LeaseWait", "after_lease_expiry"]

MARKER = "lease_expiry"
MAX_WAIT_S = 900.0  # a lease longer than this is not waited for (AideMemo's is 120 s)
PROGRESS_EVERY_S = 10.0

F = TypeVar("F", bound=Callable[..., Any])


class LeaseMode(StrEnum):
    VIRTUAL = "virtual"
    REAL = "real"


def margin_after(lease_s: float) -> float:
    """How long past a lease's sure expiry the wait goes on: rounding and clock-rate drift."""
    return max(0.25, min(3.0, 0.01 * lease_s))


def margin_before(lease_s: float) -> float:
    """How long before a lease may expire a step that needs it live is taken (5 s for 120 s, as
    with the test clock; a quarter of a short lease)."""
    return max(0.2, min(5.0, 0.25 * lease_s))


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A lease as the server granted it, timed on this process's monotonic clock."""

    lease_ms: int  # claim_expires_at_ms - claim_heartbeat_at_ms, from the server's answer
    sent_at: float  # before the request that granted it
    answered_at: float  # after its answer

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000

    @property
    def surely_expired_at(self) -> float:
        return self.answered_at + self.lease_s + margin_after(self.lease_s)

    @property
    def surely_live_until(self) -> float:
        return self.sent_at + self.lease_s - margin_before(self.lease_s)


@dataclass(slots=True, kw_only=True)
class Arranged:
    """What a check set up before its lease expires, and what it needs once it has."""

    value: Any  # handed back to the check (its project and handoff)
    lease: Lease
    before_expiry: Callable[[], Any] | None = None  # a step taken while the lease is surely live
    before: Any = None  # that step's result (or what it raised)

    def before_answer(self) -> Any:
        """The result of the step taken before expiry; re-raises what it raised."""
        if isinstance(self.before, BaseException):
            raise self.before
        if self.before is None:
            raise Untestable("the step before lease expiry did not run")
        return self.before


def after_lease_expiry(arrange: Callable[[Any], Arranged]) -> Callable[[F], F]:
    """Mark a check as observing lease expiry; ``arrange(world)`` sets up its lease.

    The check calls ``world.after_lease_expiry()`` for its ``Arranged`` once the lease expired.
    """

    def mark(function: F) -> F:
        # with_args: a lone callable argument would otherwise be taken for the decorated function.
        marked: F = pytest.mark.lease_expiry.with_args(arrange)(function)
        return marked

    return mark


def lease_of(record: dict[str, Any], sent_at: float, answered_at: float) -> Lease:
    """The lease of an accepted handoff's record.

    Raises:
        Untestable: the record carries no usable lease.
    """
    heartbeat, expires = record.get("claim_heartbeat_at_ms"), record.get("claim_expires_at_ms")
    if not isinstance(heartbeat, int) or not isinstance(expires, int) or isinstance(heartbeat, bool):
        raise Untestable(f"the accepted handoff has no integer lease fields: {heartbeat!r}, {expires!r}")
    lease_ms = expires - heartbeat
    if not 0 < lease_ms <= MAX_WAIT_S * 1000:
        raise Untestable(f"a lease of {lease_ms} ms cannot be waited for (limit {MAX_WAIT_S:g} s)")
    return Lease(lease_ms=lease_ms, sent_at=sent_at, answered_at=answered_at)



class _ByWorld:
    """Arrangements by world, told apart by identity: a world is no dictionary key (it compares by
    value), and an id alone may name a later world once an earlier one is gone, so each entry
    keeps its world and is found only by that very object."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Any, Arranged | BaseException]] = {}

    def get(self, world: Any) -> Arranged | BaseException | None:
        entry = self._entries.get(id(world))
        return entry[1] if entry is not None and entry[0] is world else None

    def __contains__(self, world: Any) -> bool:
        return self.get(world) is not None

    def __getitem__(self, world: Any) -> Arranged | BaseException:
        found = self.get(world)
        if found is None:
            raise KeyError(world)
        return found

    def __setitem__(self, world: Any, result: Arranged | BaseException) -> None:
        self._entries[id(world)] = (world, result)

@dataclass(slots=True)
class LeaseWait:
    """The one real-time wait of a process, shared by every lease-expiry check it runs."""

    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    interrupted: str | None = None
    waits: list[float] = field(default_factory=list)  # seconds slept, one entry per wait
    begun: bool = False  # the leases of this process were set up ahead (``begin``)
    _arranged: _ByWorld = field(default_factory=_ByWorld)  # world -> its arrangement or error
    _deadline: float | None = None  # when every lease set up ahead has surely expired; None once waited
    _started: float = 0.0
    _steps: threading.Thread | None = None
    _halt: threading.Event = field(default_factory=threading.Event)  # set: the steps thread stops

    def covers(self, world: Any) -> bool:
        """The world's lease was set up by a wait (or the waits were interrupted)."""
        return self.interrupted is not None or world in self._arranged

    def result(self, world: Any) -> Arranged:
        """The world's arrangement after the wait; raises what its set-up raised, or Untestable."""
        if self.interrupted is not None:
            raise Untestable(self.interrupted)
        arranged = self._arranged.get(world)
        if arranged is None:
            raise Untestable("the lease wait ran without this check's lease (a bug in the kit)")
        if isinstance(arranged, BaseException):
            raise arranged
        return arranged

    def begin(self, worlds: list[Any], arrange_of: Callable[[Any], Callable[[Any], Arranged]],
              progress: Callable[[str], None]) -> None:
        """Set up the lease of every world now, ahead of its check; run each step that needs a
        live lease at its moment on a thread of its own, while the process runs other checks."""
        self.begun = True
        pending = [w for w in worlds if w not in self._arranged]
        leases = self._arrange_all(pending, arrange_of, None)
        if not leases:
            return
        self._started = self.clock()
        self._deadline = max(a.lease.surely_expired_at for a in leases)
        longest = max(a.lease.lease_ms for a in leases)
        progress(f"leases set up ahead: {len(leases)} lease(s) of up to {longest} ms (read from the server) "
                 f"expire in {self._deadline - self._started:.1f} s while the other checks run; the lease checks "
                 "run last")
        steps = sorted(((a.lease.surely_live_until, index) for index, a in enumerate(leases) if a.before_expiry),
                       key=lambda step: step[0])
        if steps:
            self._steps = threading.Thread(target=self._run_steps, args=(steps, leases), daemon=True,
                                           name="lease-steps")
            self._steps.start()

    def finish(self, world: Any, progress: Callable[[str], None], stop: Callable[[str], None]) -> Arranged:
        """The world's arrangement once every lease set up ahead has surely expired; the first
        caller sleeps what is left of the wait (none, when the rest of the run took longer)."""
        if self._deadline is not None and self.interrupted is None:
            deadline, self._deadline = self._deadline, None
            waited_from = self.clock()
            try:
                if deadline > waited_from:
                    progress(f"lease wait: the last lease expires in {deadline - waited_from:.1f} s; Ctrl-C stops "
                             "the wait and its checks read UNTESTABLE")
                self._sleep_until(deadline, [], [], progress)
            except KeyboardInterrupt:
                self.interrupted = (f"interrupted (Ctrl-C) {self.clock() - self._started:.1f} s into the lease "
                                    "wait; lease expiry was not observed")
                progress(self.interrupted)
                stop("interrupted during the lease wait")
            self.waits.append(self.clock() - waited_from)
            if self.interrupted is None:
                progress(f"lease wait over after {self.clock() - self._started:.1f} s "
                         f"({self.waits[-1]:.1f} s of it after the other checks)")
        if self._steps is not None:
            if self.interrupted is not None:
                self._halt.set()  # the steps still ahead are never taken
            self._steps.join()  # otherwise its steps came before their leases expired: at once
        return self.result(world)

    def _run_steps(self, steps: list[tuple[float, int]], leases: list[Arranged]) -> None:
        for at, index in steps:
            if self._halt.wait(max(0.0, at - self.clock())):
                return
            self._take_step(leases[index], self.clock())

    def run(self, worlds: list[Any], arrange_of: Callable[[Any], Callable[[Any], Arranged]],
            progress: Callable[[str], None], stop: Callable[[str], None]) -> float:
        """Set up the lease of every world not set up yet, then sleep once until all have surely expired.

        ``worlds[0]`` is the check that waits: a failure of its own set-up is raised at once.

        Returns:
            The seconds slept.
        """
        pending = [w for w in worlds if w not in self._arranged]
        leases = self._arrange_all(pending, arrange_of, worlds[0] if worlds else None)
        if not leases:
            return 0.0
        steps = sorted((a.lease.surely_live_until, index) for index, a in enumerate(leases) if a.before_expiry)
        deadline = max(a.lease.surely_expired_at for a in leases)
        longest = max(a.lease.lease_ms for a in leases)
        started = self.clock()
        try:
            progress(f"lease wait: {len(leases)} lease(s) of up to {longest} ms (read from the server) expire in "
                     f"{deadline - started:.1f} s; Ctrl-C stops the wait and its checks read UNTESTABLE")
            self._sleep_until(deadline, steps, leases, progress)
        except KeyboardInterrupt:
            self.interrupted = (f"interrupted (Ctrl-C) {self.clock() - started:.1f} s into the lease wait; "
                                "lease expiry was not observed")
            progress(self.interrupted)
            stop("interrupted during the lease wait")
        self.waits.append(self.clock() - started)
        if self.interrupted is None:
            progress(f"lease wait over after {self.waits[-1]:.1f} s")
        return self.waits[-1]

    def _arrange_all(self, pending: list[Any], arrange_of: Callable[[Any], Callable[[Any], Arranged]],
                     first: Any) -> list[Arranged]:
        """Set up each pending world's lease (``first``'s own failure is raised); the leases set up."""
        for world in pending:
            self._arrange(world, arrange_of, first=world is first)
        # A lease set up early may be too close to expiry for its step once every other lease is
        # set up (provisioning through a bootstrap command takes a while): set it up again, last.
        for world in pending:
            arranged = self._arranged[world]
            if isinstance(arranged, Arranged) and arranged.before_expiry is not None:
                if self.clock() > arranged.lease.surely_live_until:
                    self._arrange(world, arrange_of, first=world is first)
        return [a for w in pending if isinstance(a := self._arranged[w], Arranged)]

    def _arrange(self, world: Any, arrange_of: Callable[[Any], Callable[[Any], Arranged]], *, first: bool) -> None:
        try:
            self._arranged[world] = arrange_of(world)(world)
        except (Untestable, AssertionError) as exc:
            if first:
                raise  # the waiting check's own set-up: report it at once
            self._arranged[world] = exc
        except Exception as exc:  # a sibling's set-up must not break the check that waits
            if first:
                raise
            self._arranged[world] = exc

    def _sleep_until(self, deadline: float, steps: list[tuple[float, int]], leases: list[Arranged],
                     progress: Callable[[str], None]) -> None:
        next_note = self.clock() + PROGRESS_EVERY_S
        while True:
            now = self.clock()
            while steps and steps[0][0] <= now:
                self._take_step(leases[steps.pop(0)[1]], now)
            if now >= deadline:
                return
            if now >= next_note:
                progress(f"lease wait: {deadline - now:.0f} s left")
                next_note = now + PROGRESS_EVERY_S
            wake = min([deadline, next_note] + ([steps[0][0]] if steps else []))
            self.sleep(max(0.0, wake - now))


    @staticmethod
    def _take_step(arranged: Arranged, now: float) -> None:
        """The step that needs ``arranged``'s lease live, unless it is too late for it."""
        assert arranged.before_expiry is not None
        if now > arranged.lease.surely_live_until + margin_before(arranged.lease.lease_s) / 2:
            arranged.before = Untestable("setting up the other leases took so long that this lease may "
                                         "have expired before the step that needs it live")
            return
        try:
            arranged.before = arranged.before_expiry()
        except Exception as exc:  # judged by its check, not by the one that waits
            arranged.before = exc


def not_observable() -> NotScored:
    return NotScored("lease expiry is observed through the test-clock extension or by waiting for real "
                     "(--real-time-leases); the target offers neither")
