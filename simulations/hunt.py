"""Hunts: campaign shards on a Dask cluster, their findings deduplicated and written once.

A hunt of N shards runs N ordinary campaigns (``run_campaign``, then ``shrink``), each with a seed
derived from the printed root seed and its shard number, each on its own embedded reference (the
AideMemo or the XMemo one) or, against a server, in a project the coordinator provisioned for it
alone. The cluster is Dask's: a ``LocalCluster`` of N processes started
here, or any running scheduler (``dask scheduler`` and ``dask worker``, or a deployment's).
A shard is a pure function of its ``ShardSpec``, so when a worker dies Dask runs it again
elsewhere and nothing else of the hunt changes. Findings are told apart by what was violated
(the finding's kind and the operations of the shrunk case), and each distinct one is written
once, by the coordinator, with the command that replays it on one machine.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import CancelledError
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from simulations.campaign import RunResult, run_campaign
from simulations.errors import SimulationError
from simulations.replay import export_failure
from simulations.shrink import URL_RATE_RUNS, reproduction, shrink, shrink_over_http
from simulations.targets import HttpTarget, load_factory
from simulations.xmemo.races import XMemoRun

__all__ = ["Display", "Distinct", "HuntResult", "ShardOutcome", "ShardSpec", "finding_key", "run_hunt", "run_shard",
           "shard_seed", "summary"]

_PROGRESS_S = 2.0  # how often the coordinator prints a progress line
_POLL_S = 0.25  # how often it looks for finished shards and for Ctrl-C
_CONNECT_S = 5  # how long to wait for a scheduler that was named


def shard_seed(root: int, index: int) -> int:
    """Shard ``index``'s seed: a hash of the root seed and the shard number (32 bits, as printed seeds)."""
    digest = hashlib.blake2b(f"aidememo-sim shard {root} {index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardSpec:
    """Everything a shard needs; the same spec gives the same campaign (``--batches`` exactly)."""

    root_seed: int
    index: int
    actors: int
    budget_s: float
    max_batches: int | None
    factory: str | None  # FILE.py:NAME of a planted variant, an absolute path; None: the reference
    protocol: str = "aidememo"  # or "xmemo": an XMemo campaign on the embedded XMemo reference
    # A server by URL: the project the coordinator provisioned for this shard alone, and its
    # actors' tokens (in memory only: never printed, logged or written; repr hides them).
    url: str | None = None
    project: str | None = None
    tokens: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 10.0
    config: str | None = None  # the target file, recorded in a replay file so a replay provisions again

    @property
    def seed(self) -> int:
        return shard_seed(self.root_seed, self.index)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardOutcome:
    index: int
    seed: int
    batches: int
    operations: int
    elapsed_s: float
    verdict: str
    found: RunResult | XMemoRun | None  # the shrunk failing campaign, when the shard found one
    reproduction: tuple[int, int] | None = None  # over a URL: how often the shrunk case reproduced


def run_shard(spec: ShardSpec) -> ShardOutcome:
    """One shard on a worker: a campaign on its own embedded reference, shrunk when it fails."""
    if spec.protocol == "xmemo":
        return _xmemo_shard(spec)
    if spec.url is not None:
        return _url_shard(spec)
    factory = load_factory(spec.factory)
    result = run_campaign(seed=spec.seed, actors=spec.actors, budget_s=spec.budget_s,
                          max_batches=spec.max_batches, factory=factory)
    found = shrink(result, factory) if result.finding is not None else None
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=len(result.plan.batches),
                        operations=len(result.history), elapsed_s=result.elapsed_s,
                        verdict=result.verdict.value, found=found)


def _url_shard(spec: ShardSpec) -> ShardOutcome:
    """A shard against a server, in its own project: found, shrunk and measured there, as one process does."""
    assert spec.url is not None and spec.project is not None
    target = HttpTarget(spec.url, spec.project, spec.tokens, timeout_s=spec.timeout_s)
    result = run_campaign(seed=spec.seed, actors=spec.actors, budget_s=spec.budget_s, max_batches=spec.max_batches,
                          target=target)
    found, rate = None, None
    if result.finding is not None:
        found = shrink_over_http(result, target)
        rate = (reproduction(found, target, URL_RATE_RUNS), URL_RATE_RUNS)
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=len(result.plan.batches),
                        operations=len(result.history), elapsed_s=result.elapsed_s, verdict=result.verdict.value,
                        found=found, reproduction=rate)


def _xmemo_shard(spec: ShardSpec) -> ShardOutcome:
    from simulations.xmemo import races

    factory = load_factory(spec.factory) if spec.factory else races.reference_factory
    run = races.run_campaign(seed=spec.seed, budget_s=spec.budget_s, max_batches=spec.max_batches, factory=factory)
    found = races.shrink(run, factory) if run.finding is not None else None
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=len(run.plan.batches), operations=len(run.history),
                        elapsed_s=run.elapsed_s, verdict="illegal" if run.findings else "ok", found=found)


def _violated(result: RunResult | XMemoRun) -> str:
    """The AideMemo rule (or the ledger model) a finding broke, or the XMemo requirement."""
    finding = result.finding
    assert finding is not None
    return finding.requirement if isinstance(result, XMemoRun) else finding.kind  # type: ignore[union-attr]


def finding_key(result: RunResult | XMemoRun) -> tuple[str, tuple[str, ...]]:
    """What a shrunk failure violated: the rule, model or requirement, and its operations' kinds."""
    assert result.finding is not None
    ops = tuple(sorted(str(result.history[i].input.get("op")) for i in result.finding.witness
                       if i < len(result.history)))
    return _violated(result), ops


@dataclass(slots=True)
class Distinct:
    """One distinct finding: the first shard's case, and every shard that found it."""

    result: RunResult | XMemoRun
    shards: list[int]
    paths: dict[str, Path] = field(default_factory=dict)


@dataclass(slots=True)
class HuntResult:
    shards: int
    done: list[ShardOutcome] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    findings: dict[tuple[str, tuple[str, ...]], Distinct] = field(default_factory=dict)
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
        self.findings[key] = Distinct(outcome.found, [outcome.index])
        return self.findings[key]


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

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.live = stream.isatty()
        self._shown = False
        self.every_s = _POLL_S * 2 if self.live else _PROGRESS_S

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
    try:
        with interrupts.held():
            _hunt(hunt, specs, workers, scheduler, out, display, interrupts)
    except CancelledError as exc:  # distributed cancels every future when the scheduler goes
        where = "" if scheduler is None else f" at {scheduler}"
        raise SimulationError(f"lost the Dask scheduler{where} after {len(hunt.done)} of {hunt.shards} shards "
                              f"({len(hunt.findings)} distinct findings written to {out})") from None
    hunt.elapsed_s = time.monotonic() - started
    return hunt


def _hunt(hunt: HuntResult, specs: list[ShardSpec], workers: int, scheduler: str | None, out: Path,
          display: Display, interrupts: _Interrupts) -> None:
    from distributed import wait

    started = time.monotonic()
    with _client(workers, scheduler) as client:
        hunt.workers = len(client.scheduler_info().get("workers", {})) or workers
        link = _dashboard(client)
        if link is not None:
            display.line(f"dask dashboard: {link}")
        pending = {client.submit(run_shard, spec, key=f"aidememo-sim-shard-{spec.root_seed}-{spec.index}",
                                 pure=False): spec for spec in specs}
        last = time.monotonic()
        while pending and not interrupts.caught:
            try:
                finished, _ = wait(list(pending), timeout=_POLL_S,  # type: ignore[no-untyped-call]
                                   return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            for future in finished:
                spec = pending.pop(future)
                _collect(hunt, future, spec, out, display.line)
            if time.monotonic() - last >= display.every_s:
                last = time.monotonic()
                display.status(_progress(hunt, len(pending), last - started))
        if interrupts.caught:
            hunt.interrupted = True
            client.cancel(list(pending))
    display.line("")  # ends a live line; a blank line before the summary otherwise


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
    if distinct is not None:  # written by the coordinator, once
        if isinstance(distinct.result, XMemoRun):
            from simulations.xmemo.races import export_failure as export_xmemo

            distinct.paths = export_xmemo(distinct.result, out, factory=spec.factory)
        elif spec.url is not None:
            distinct.paths = export_failure(distinct.result, out, target="url", url=spec.url,
                                            config=None if spec.config is None else Path(spec.config),
                                            reproduction=outcome.reproduction)
        else:
            distinct.paths = export_failure(distinct.result, out, target="embedded", factory=spec.factory)
        report(f"shard {spec.index} (seed {spec.seed}) found a {_violated(distinct.result)} violation: "
               f"aidememo-sim replay {distinct.paths['replay file']}")


def _progress(hunt: HuntResult, running: int, elapsed_s: float) -> str:
    return (f"  {elapsed_s:5.1f} s: {len(hunt.done)} shards done, {running} running, {len(hunt.lost)} lost, "
            f"{hunt.operations} operations, {len(hunt.findings)} distinct findings")


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
    for number, distinct in enumerate(hunt.findings.values(), 1):
        first = distinct.result.seed
        lines.append(f"finding {number}: {_violated(distinct.result)}, found by shards "
                     f"{', '.join(map(str, sorted(distinct.shards)))} (seed {first} first)")
        lines.append(f"  the shard alone: {rerun_words.replace('{seed}', str(first), 1)}")
        if "replay file" in distinct.paths:
            lines.append(f"  reproduce with: aidememo-sim replay {distinct.paths['replay file']}")
    return lines
