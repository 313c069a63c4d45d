"""The fault schedule of a campaign: which fault, at which batch, with which seeded parameters.

Pure: nothing here sends a signal or opens a socket (``nemesis`` does). The schedule is drawn
from the campaign's printed seed, batch by batch, each batch from its own stream: the same seed
gives the same faults at the same batches however long the run, so a replay (the same command)
repeats them. A kill falls on an event the proxy sees (a server's answer to the batch's n-th
write it accepted), so a replay repeats it at the same point of the batch; a pause or a clock
jump falls a seeded time after a write is sent, and which request it meets there is the network's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulations.errors import SimulationError

__all__ = ["CLOCK_KINDS", "FAULT_KINDS", "SERVED_KINDS", "Fault", "FaultSchedule", "parse_faults"]

# kill: SIGKILL of the server's process group, then the same command on the same data.
# pause: SIGSTOP of the group, a seeded wait, SIGCONT.
# drop-answers: the proxy forwards POSTs and loses their answers.
# reset: the proxy resets the connection, before forwarding the request or after.
# clock-jump: the test clock moved forward by about a lease, while the batch's writes are in flight.
FAULT_KINDS = ("kill", "pause", "drop-answers", "reset", "clock-jump")
SERVED_KINDS = frozenset({"kill", "pause"})  # these need the target file's [serve] command
CLOCK_KINDS = frozenset({"clock-jump"})  # these need a target file claiming the test-clock capability
FIRST_BATCH = 2  # the first batches set the races up undisturbed
RATE = 0.3  # share of the batches that get a fault
JUMP_SPREAD_MS = 2_000  # a clock jump lands this close to one lease past the clock's time, either side


def parse_faults(text: str) -> tuple[str, ...]:
    """``kill,pause,drop-answers,reset`` -> the kinds, in the order given, each once.

    Raises:
        SimulationError: an unknown or missing kind (one line).
    """
    kinds: list[str] = []
    for word in (w.strip() for w in text.split(",")):
        if word not in FAULT_KINDS:
            raise SimulationError(f"--faults: unknown fault {word!r} (the kinds are {', '.join(FAULT_KINDS)})")
        if word not in kinds:
            kinds.append(word)
    return tuple(kinds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One fault: its kind, the batch it falls in, when in it and for how long."""

    batch: int
    kind: str
    # kill: the batch's writes the server accepted (answered 200) before the one it falls on;
    # pause, clock-jump: the batch's writes sent before it (then ``delay_ms`` more)
    after_posts: int
    delay_ms: int  # 0 for a kill: it falls the moment the answer is in the proxy's hands
    length_ms: int  # kill: down time before the restart; pause: stopped time; else 0
    count: int  # drop-answers and reset: how many POSTs in a row (2: the retry too is lost)
    before: bool = False  # reset only: before the request is forwarded (else after it ran)
    jump_ms: int = 0  # clock-jump only: how far past (> 0) or short of (< 0) one lease from now
    server: int = 0  # kill, pause: which of the target file's servers (in [[serve]] order)

    def describe(self) -> str:
        if self.kind == "kill":
            return (f"batch {self.batch}: kill{self._which()} as its answer to the batch's write "
                    f"#{self.after_posts + 1} it accepted reaches the proxy (the answer passed on after), "
                    f"restart after {self.length_ms} ms down")
        if self.kind == "pause":
            return (f"batch {self.batch}: pause{self._which()} {self.delay_ms} ms after its write "
                    f"#{self.after_posts + 1} is sent, for {self.length_ms} ms")
        if self.kind == "clock-jump":
            side = f"{self.jump_ms} ms past" if self.jump_ms > 0 else f"{-self.jump_ms} ms short of"
            return (f"batch {self.batch}: the test clock moved {side} one lease, {self.delay_ms} ms after its write "
                    f"#{self.after_posts + 1} is sent")
        what = "answers dropped" if self.kind == "drop-answers" else (
            "connections reset before forwarding" if self.before else "connections reset after the server ran")
        return f"batch {self.batch}: {self.count} {what}"

    def _which(self) -> str:
        return f" of server #{self.server + 1}" if self.server else ""

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "kind": self.kind, "after_posts": self.after_posts, "delay_ms": self.delay_ms,
                "length_ms": self.length_ms, "count": self.count, "before": self.before, "jump_ms": self.jump_ms,
                "server": self.server}


@dataclass(frozen=True, slots=True)
class FaultSchedule:
    """The faults of a campaign with ``seed`` over ``kinds``, drawn batch by batch."""

    seed: int
    kinds: tuple[str, ...]
    servers: int = 1  # the target file's [[serve]] servers: a kill or pause hits one of them
    keep: frozenset[int] | None = None  # a shrunk schedule: only the faults of these batches (None: all)

    def at(self, batch: int) -> Fault | None:
        """The fault of batch ``batch`` (None: none), from that batch's own stream of the seed."""
        if batch < FIRST_BATCH or not self.kinds or (self.keep is not None and batch not in self.keep):
            return None
        rng = random.Random(f"faults:{self.seed}:{batch}")
        if rng.random() >= RATE:
            return None
        kind = rng.choice(self.kinds)
        # Timed from a write of the batch, not from its start: a batch's requests take a few
        # milliseconds of it, and a fault is meant to meet them in flight, or just answered. A
        # kill has no delay, but draws one all the same: the draws after it stay a seed's.
        posts, delay = rng.randrange(0, 3), rng.randrange(0, 40)
        if kind in SERVED_KINDS:
            length = rng.randrange(20, 300) if kind == "kill" else rng.randrange(100, 800)
            # Drawn last, and only with several servers: a seed's schedule for one server stays as it was.
            server = rng.randrange(self.servers) if self.servers > 1 else 0
            return Fault(batch=batch, kind=kind, after_posts=posts, delay_ms=0 if kind == "kill" else delay,
                         length_ms=length, count=0, server=server)
        if kind == "clock-jump":
            # Around the lease: claims taken a moment before are then just live or just expired,
            # and those taken a batch or more before are past it, while the batch races on them.
            jump = rng.randrange(1, JUMP_SPREAD_MS) * (1 if rng.random() < 0.5 else -1)
            return Fault(batch=batch, kind=kind, after_posts=posts, delay_ms=delay, length_ms=0, count=0, jump_ms=jump)
        # One lost answer is settled by the identical retry; two in a row leave the operation
        # indeterminate in the history.
        count = 2 if rng.random() < 0.3 else 1
        return Fault(batch=batch, kind=kind, after_posts=0, delay_ms=0, length_ms=0, count=count,
                     before=kind == "reset" and rng.random() < 0.5)

    def upto(self, batches: int) -> list[Fault]:
        """The faults of the first ``batches`` batches."""
        return [f for f in (self.at(i) for i in range(batches)) if f is not None]

    def words(self) -> Sequence[str]:
        """The command-line words that give this schedule again (with the same ``--seed``)."""
        return ["--faults", ",".join(self.kinds)]
