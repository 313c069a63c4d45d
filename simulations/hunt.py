"""Hunts: campaign shards on a Dask cluster, their progress watched, their findings written once.

A hunt of N shards runs N ordinary campaigns (``shards.run_shard``), each with a seed derived
from the printed root seed and its shard number. The cluster is Dask's: a ``LocalCluster`` of N
processes started here, or any running scheduler (``dask scheduler`` and ``dask worker``, or a
deployment's). Running shards publish their counts as Dask worker events on the hunt's topic,
which the coordinator subscribes to, so the progress line counts running shards as well as
finished ones. A shard is a pure function of its spec, so when a worker dies Dask runs it again
elsewhere and nothing else of the hunt changes. Findings are told apart by ``findings.finding_key``
(what was violated, and the shape of the shrunk case), and each distinct one is written once,
here, with the command that replays it on one machine.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from refkit.files import open_fresh
from simulations.clients import ClientRun
from simulations.faults.shard import FaultFound
from simulations.errors import SimulationError
from simulations.findings import Distinct, Key, finding_key, violated
from simulations.linearizability.history import Header, dump_history
from simulations.replay import export_failure, finding_lines, reproduce_lines
from simulations.shards import ShardOutcome, ShardSpec, run_shard
from simulations.targets import named_words
from simulations.xmemo.campaign import XMemoRun

__all__ = ["Display", "HuntResult", "Progress", "run_hunt", "summary"]

_PROGRESS_S = 2.0  # how often the coordinator prints a progress line when the output is not a terminal
_POLL_S = 0.25  # how often it looks for finished shards and for Ctrl-C
_CONNECT_S = 5  # how long to wait for a scheduler that was named


@dataclass(slots=True)
class HuntResult:
    shards: int
    done: list[ShardOutcome] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    findings: dict[Key, Distinct] = field(default_factory=dict)
    workers: int = 0
    elapsed_s: float = 0.0
    interrupted: bool = False

    @property
    def operations(self) -> int:
        return sum(outcome.operations for outcome in self.done)

    def note(self, outcome: ShardOutcome) -> Distinct | None:
        """Count a finished shard; returns its finding when it is a new one."""
        self.done.append(outcome)
        if outcome.found is None:
            return None
        key = finding_key(outcome.found)
        known = self.findings.get(key)
        if known is not None:
            known.shards.append(outcome.index)
            return None
        self.findings[key] = Distinct(outcome.found, [outcome.index], reproduction=outcome.reproduction)
        return self.findings[key]


class Progress:
    """What the running shards last published (Dask worker events on the hunt's topic): their
    operations so far and whether they found something. The handler runs on the Dask client's
    thread, the status line on the hunt's: hence the lock. A shard Dask runs again after its
    worker died starts again from 0."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[int, dict[str, Any]] = {}
        self._previous: tuple[float, int] | None = None

    def heard(self, event: tuple[float, Any]) -> None:
        _stamp, message = event
        if isinstance(message, dict) and isinstance(message.get("index"), int):
            with self._lock:
                self._latest[message["index"]] = message

    def line(self, hunt: HuntResult, elapsed_s: float) -> str:
        """The status: shards done, running and queued, operations and their rate since the last
        line, findings so far (found by running shards too) and how many are distinct."""
        finished = {outcome.index for outcome in hunt.done} | set(hunt.lost)
        with self._lock:
            running = {i: m for i, m in self._latest.items() if i not in finished}
        operations = hunt.operations + sum(int(m.get("operations", 0)) for m in running.values())
        found = sum(o.found is not None for o in hunt.done) + sum(bool(m.get("found")) for m in running.values())
        rate = 0.0
        if self._previous is not None and elapsed_s > self._previous[0]:
            rate = max(0, operations - self._previous[1]) / (elapsed_s - self._previous[0])
        self._previous = (elapsed_s, operations)
        queued = hunt.shards - len(finished) - len(running)
        return (f"  {elapsed_s:5.1f} s: {len(hunt.done)} shards done, {len(running)} running, {queued} queued, "
                f"{len(hunt.lost)} lost, {operations} operations, {rate:.0f} operations/s, {found} findings so far "
                f"({len(hunt.findings)} distinct)")


@contextmanager
def _client(workers: int, scheduler: str | None) -> Iterator[Any]:
    """A Dask client: of a ``LocalCluster`` of ``workers`` processes, or of the named scheduler.

    Raises:
        SimulationError: when the scheduler cannot be reached.
    """
    from distributed import Client, LocalCluster

    # distributed's constructors are untyped. Its log lines are not the hunt's output: what
    # matters (a lost scheduler, a lost shard) the hunt says itself, in one line.
    for name in [n for n in logging.root.manager.loggerDict if n.split(".")[0] in ("distributed", "tornado")]:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if scheduler is None:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,  # type: ignore[no-untyped-call]
                          dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
                Client(cluster) as client:  # type: ignore[no-untyped-call]
            yield client
        return
    try:
        client = Client(scheduler, timeout=f"{_CONNECT_S}s")  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise SimulationError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    with client:
        yield client


class Display:
    """Where a hunt's progress goes: one live status line on a terminal, rewritten in place, or a
    plain line every two seconds when the output is not a terminal (a log, a CI job)."""

    def __init__(self, stream: TextIO, every_s: float | None = None) -> None:
        self._stream = stream
        self.live = stream.isatty()
        self._shown = False
        self.every_s = every_s if every_s is not None else _POLL_S * 2 if self.live else _PROGRESS_S

    def line(self, text: str) -> None:
        """A line that stays (a finding, the summary)."""
        if self._shown:
            self._stream.write("\r\x1b[K")  # the live line goes; it comes back at the next status
            self._shown = False
        self._stream.write(text + "\n")
        self._stream.flush()

    def status(self, text: str) -> None:
        if not self.live:
            self.line(text)
            return
        self._stream.write("\r\x1b[K" + text.strip())
        self._stream.flush()
        self._shown = True


class _Interrupts:
    """Ctrl-C as a flag the hunt's loop looks at, not an exception: raised inside distributed's
    event-loop machinery, a KeyboardInterrupt leaves tracebacks and processes it cannot close.
    The first Ctrl-C stops the hunt cleanly; a second one, during the clean stop, is Python's own."""

    def __init__(self) -> None:
        self.caught = False

    @contextmanager
    def held(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread receives signals
            return
        previous = signal.getsignal(signal.SIGINT)

        def note(_number: int, _frame: object) -> None:
            self.caught = True
            signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGINT, note)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def _dashboard(client: Any) -> str | None:
    try:
        services = client.scheduler_info().get("services", {})
    except (OSError, TimeoutError):
        return None
    return str(client.dashboard_link) if "dashboard" in services else None


def run_hunt(specs: list[ShardSpec], *, workers: int, scheduler: str | None, out: Path,
             display: Display) -> HuntResult:
    """Run ``specs`` on the cluster, writing each distinct finding to ``out`` as it comes in.

    A shard whose worker died is run again by Dask; one that failed for good (``KilledWorker``
    after its retries, or an error of its own) is counted as lost. Ctrl-C cancels what is still
    running and returns what was found so far (``interrupted``).

    Raises:
        SimulationError: when the scheduler cannot be reached, or is lost during the hunt.
    """
    started = time.monotonic()
    hunt = HuntResult(shards=len(specs))
    interrupts = _Interrupts()
    # The topic names this hunt alone: a scheduler may serve several hunts at once.
    topic = f"aidememo-sim-hunt-{specs[0].root_seed if specs else 0}-{os.getpid()}-{time.monotonic_ns()}"
    specs = [replace(spec, topic=topic) for spec in specs]
    try:
        with interrupts.held():
            _hunt(hunt, specs, workers, scheduler, out, display, interrupts)
    except CancelledError:  # distributed cancels every future when the scheduler goes
        where = "" if scheduler is None else f" at {scheduler}"
        raise SimulationError(f"lost the Dask scheduler{where} after {len(hunt.done)} of {hunt.shards} shards "
                              f"({len(hunt.findings)} distinct findings written to {out})") from None
    hunt.elapsed_s = time.monotonic() - started
    return hunt


def _hunt(hunt: HuntResult, specs: list[ShardSpec], workers: int, scheduler: str | None, out: Path,
          display: Display, interrupts: _Interrupts) -> None:
    started = time.monotonic()
    progress = Progress()
    with _client(workers, scheduler) as client:
        hunt.workers = len(client.scheduler_info().get("workers", {})) or workers
        link = _dashboard(client)
        if link is not None:
            display.line(f"dask dashboard: {link}")
        if specs and specs[0].topic is not None:
            client.subscribe_topic(specs[0].topic, progress.heard)
        pending = {client.submit(run_shard, spec, key=f"aidememo-sim-shard-{spec.root_seed}-{spec.index}",
                                 pure=False): spec for spec in specs}
        _watch(hunt, pending, out, display, interrupts, lambda: progress.line(hunt, time.monotonic() - started))
        if interrupts.caught:
            hunt.interrupted = True
            client.cancel(list(pending))
    display.line("")  # ends a live line; a blank line before the summary otherwise


def _watch(hunt: HuntResult, pending: dict[Any, ShardSpec], out: Path, display: Display,
           interrupts: _Interrupts, status: Callable[[], str]) -> None:
    """Collect finished shards as they come, a status line every ``display.every_s``, until every
    shard is in or Ctrl-C."""
    from distributed import wait

    last = time.monotonic()
    while pending and not interrupts.caught:
        try:
            finished, _ = wait(list(pending), timeout=_POLL_S,  # type: ignore[no-untyped-call]
                               return_when="FIRST_COMPLETED")
        except TimeoutError:
            finished = set()
        for future in finished:
            _collect(hunt, future, pending.pop(future), out, display.line)
        if time.monotonic() - last >= display.every_s:
            last = time.monotonic()
            display.status(status())


def _collect(hunt: HuntResult, future: Any, spec: ShardSpec, out: Path, report: Callable[[str], None]) -> None:
    try:
        outcome: ShardOutcome = future.result()
    except (OSError, TimeoutError) as exc:
        raise SimulationError(f"lost the Dask scheduler: {exc}") from None
    except CancelledError:
        raise  # the scheduler went: run_hunt says so
    except Exception as exc:  # the shard failed for good (KilledWorker, or its own error)
        hunt.lost.append(spec.index)
        report(f"shard {spec.index} (seed {spec.seed}) lost: {type(exc).__name__}: {exc}")
        return
    distinct = hunt.note(outcome)
    if distinct is None:
        return
    distinct.paths = _export(distinct.result, outcome, spec, out)  # by the coordinator, once
    distinct.replay_words = named_words(spec.factory, spec.config)
    where = distinct.paths.get("replay file", distinct.paths.get("history", distinct.paths.get("fault report")))
    report(f"shard {spec.index} (seed {spec.seed}) found a {violated(distinct.result)} violation: {where}")


def _export(found: Any, outcome: ShardOutcome, spec: ShardSpec, out: Path) -> dict[str, Path]:
    """A distinct finding's files in the coordinator's ``out``: the replay file and its exports,
    or, for the remote client's races (which replay from their seed), their history."""
    if isinstance(found, XMemoRun):
        from simulations.xmemo.replay import export_failure as export_xmemo

        return export_xmemo(found, out, factory=spec.factory)
    if isinstance(found, FaultFound):  # written by the shard, beside its server's log
        return {"fault report": Path(found.report), **({"history": Path(found.history)} if found.history else {})}
    if isinstance(found, ClientRun):
        path = out / f"clients-seed-{found.seed}.jsonl"
        try:
            out.mkdir(parents=True, exist_ok=True)
            with open_fresh(path) as handle:
                dump_history(found.history, handle, Header(model="ledger"))
        except OSError as exc:
            raise SimulationError(f"cannot write the failure files to {out}: {exc.strerror}") from exc
        return {"history": path}
    if spec.url is not None:
        return export_failure(found, out, target="url", url=spec.url,
                              config=None if spec.config is None else Path(spec.config),
                              reproduction=outcome.reproduction)
    return export_failure(found, out, target="embedded", factory=spec.factory)


def summary(hunt: HuntResult, rerun_words: str) -> list[str]:
    """The hunt's closing lines: shards run and lost, operations, rate per worker, each distinct
    finding with its shard seeds and the command that replays it on one machine.

    ``rerun_words``: the command that runs one shard alone, ``{seed}`` where its seed goes.
    """
    busy = sum(outcome.elapsed_s for outcome in hunt.done)
    rate = hunt.operations / busy if busy > 0 else 0.0
    lines = [f"hunt: {len(hunt.done)} of {hunt.shards} shards run, {len(hunt.lost)} lost, {hunt.operations} "
             f"operations, {rate:.0f} operations/s per worker ({hunt.workers} workers), "
             f"{len(hunt.findings)} distinct findings in {hunt.elapsed_s:.1f} s"]
    here = {o.index: o for o in hunt.done}
    for number, distinct in enumerate(hunt.findings.values(), 1):
        first = distinct.result.seed
        lines.append(f"finding {number}: {violated(distinct.result)}, found by shards "
                     f"{', '.join(map(str, sorted(distinct.shards)))} (seed {first} first)")
        lines.append(f"  the shard alone: {rerun_words.replace('{seed}', str(first), 1)}")
        shard = here.get(distinct.shards[0])
        if shard is not None and shard.history is not None:
            away = shard.host and shard.host != socket.gethostname()
            lines.append(f"  its shard's history: {shard.history}" + (f" (on {shard.host})" if away else ""))
        if isinstance(distinct.result, FaultFound):  # shrunk and written by its shard, on the shard's machine
            lines += [f"  {line}" for line in distinct.result.replay]
        if "replay file" in distinct.paths:
            lines += [f"  {line}" for line in finding_lines(distinct.paths)]
            lines += [f"  {line}" for line in reproduce_lines(distinct.paths, distinct.reproduction,
                                                                 distinct.replay_words)]
    return lines

