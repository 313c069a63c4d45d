"""Hunt shards: what one Dask task runs, and the progress it publishes while it runs.

A shard is an ordinary campaign (AideMemo's ``run_campaign`` then ``shrink``, the XMemo one, or
the remote client's), with a seed derived from the hunt's printed root seed and its shard
number, on its own embedded reference or, against a server, in a project the coordinator
provisioned for it alone. An AideMemo shard writes its history to its own JSON-lines file in the
hunt's output folder (``run-seed-SEED.jsonl``, the file ``aidememo-sim run --seed SEED`` writes),
through the same ``history_file`` path a single-process run takes, so a shard keeps in memory
only what its checks need and its finding is explained from that file. A shard is a pure
function of its ``ShardSpec``: when a worker dies Dask runs it again elsewhere and nothing else
of the hunt changes. This module runs on the workers; it writes no finding (the coordinator
does, once) and prints nothing.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulations.campaign import RunResult, run_campaign
from simulations.clients import ClientRun
from simulations.faults.shard import FaultFound
from simulations.linearizability.checker import Verdict
from simulations.plan import SEGMENT_BATCHES
from simulations.shrink import shrink_where_found
from simulations.targets import HttpTarget, load_factory
from simulations.xmemo.campaign import XMemoRun

__all__ = ["PUBLISH_S", "Found", "ShardOutcome", "ShardSpec", "history_path", "run_shard", "shard_seed"]

PUBLISH_S = 1.0  # how often a running shard publishes its counts: often enough for a live line
Found = RunResult | XMemoRun | ClientRun | FaultFound  # what a shard found, shrunk where its kind shrinks


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
    # FILE.py:NAME of a planted variant (for ``clients``, of the client class), an absolute path;
    # None: the reference (the kit's client)
    factory: str | None
    protocol: str = "aidememo"  # "xmemo": an XMemo campaign; "clients": the remote client's races
    # The hunt's output folder (absolute): an AideMemo shard writes its history there. None: the
    # shard keeps its history in memory (a library caller's choice, never the command line's).
    out: str | None = None
    # A server by URL: the project the coordinator provisioned for this shard alone, and its
    # actors' tokens (in memory only: never printed, logged or written; repr hides them).
    url: str | None = None
    project: str | None = None
    tokens: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 10.0
    config: str | None = None  # the target file, recorded in a replay file so a replay provisions again
    # ``clients`` only: handoffs, racing clients per handoff, share of the answers lost.
    rounds: int = 4
    clients: int = 3
    loss: float = 0.3
    topic: str | None = None  # the Dask event topic the coordinator reads progress from
    segment: int = SEGMENT_BATCHES  # batches per segment of an embedded campaign (0: one segment)
    # A fault campaign against a server of ``config`` the shard starts for itself, and the
    # command that runs one shard alone (``{seed}`` where its seed goes), for its reports.
    faults: tuple[str, ...] = ()
    alone: str = ""

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
    verdict: Verdict  # the XMemo and client races report OK or ILLEGAL only
    found: Found | None  # the shrunk failing campaign, when the shard found one
    reproduction: tuple[int, int] | None = None  # over a URL: how often the shrunk case reproduced
    history: str | None = None  # the shard's history file, on the machine ``host`` names
    host: str = ""


def history_path(spec: ShardSpec) -> Path | None:
    """Where an AideMemo shard writes its history: the hunt's ``--out`` folder, as the shard run
    alone would; on a worker that cannot write there (another machine), its temporary folder."""
    if spec.out is None or spec.protocol != "aidememo":
        return None
    name = f"run-seed-{spec.seed}.jsonl"
    for folder in (Path(spec.out), Path(tempfile.gettempdir()) / f"aidememo-sim-hunt-{spec.root_seed}"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder / name
    return None


def run_shard(spec: ShardSpec) -> ShardOutcome:
    """One shard on a worker: its campaign, shrunk when it fails, publishing progress as it runs."""
    _stop_worker_profiler()
    publish = _publisher(spec)
    publish(0.0, 0, None)
    if spec.faults:
        outcome = _fault_shard(spec, publish)
    elif spec.protocol == "xmemo":
        outcome = _xmemo_shard(spec, publish)
    elif spec.protocol == "clients":
        outcome = _clients_shard(spec, publish)
    else:
        outcome = _aidememo_shard(spec, publish)
    publish(outcome.elapsed_s, outcome.operations, _violated_word(outcome.found), force=True, done=True)
    return outcome


def _aidememo_shard(spec: ShardSpec, publish: _Publish) -> ShardOutcome:
    """A campaign on its own embedded reference or, with a URL, in its own project: found,
    shrunk and (over a URL) measured there, as one process does."""
    target = None if spec.url is None else HttpTarget(spec.url, str(spec.project), spec.tokens,
                                                      timeout_s=spec.timeout_s)
    factory = load_factory(spec.factory)
    history = history_path(spec)
    result = run_campaign(seed=spec.seed, actors=spec.actors, budget_s=spec.budget_s, max_batches=spec.max_batches,
                          factory=factory, target=target, history_file=history, segment_batches=spec.segment,
                          on_batch=lambda seconds, operations: publish(seconds, operations, None))
    found, rate = None, None
    if result.finding is not None:
        publish(result.elapsed_s, result.operations, result.finding.kind, force=True)  # before the shrinking
        found, rate = shrink_where_found(result, factory, target)
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=len(result.plan.batches),
                        operations=result.operations, elapsed_s=result.elapsed_s, verdict=result.verdict,
                        found=found, reproduction=rate, history=None if history is None else str(history),
                        host=socket.gethostname())


def _fault_shard(spec: ShardSpec, publish: Callable[[float, int, str | None], None]) -> ShardOutcome:
    """A fault campaign against a server of the target file this shard starts for itself, publishing
    its counts as it runs; its reports in its own folder of the hunt's output (not shrunk: its
    seed and faults are the case)."""
    from aidememo_client.client import AideMemoClient
    from simulations.faults.shard import run_client_fault_shard, run_fault_shard, run_xmemo_fault_shard

    assert spec.config is not None and spec.out is not None  # the command line gives both with faults
    alone = spec.alone.replace("{seed}", str(spec.seed), 1)

    def on_batch(seconds: float, operations: int) -> None:
        publish(seconds, operations, None)

    if spec.protocol == "clients":
        client_class = load_factory(spec.factory, "client class") if spec.factory else AideMemoClient
        found = run_client_fault_shard(config=Path(spec.config), seed=spec.seed, kinds=spec.faults, rounds=spec.rounds,
                                       clients=spec.clients, loss=spec.loss, client_class=client_class,
                                       budget_s=spec.budget_s, out=Path(spec.out), command=alone, on_batch=on_batch,
                                       client_name=spec.factory)
    elif spec.protocol == "xmemo":
        found = run_xmemo_fault_shard(config=Path(spec.config), seed=spec.seed, kinds=spec.faults,
                                      budget_s=spec.budget_s, max_batches=spec.max_batches, out=Path(spec.out),
                                      command=alone, on_batch=on_batch)
    else:
        found = run_fault_shard(config=Path(spec.config), seed=spec.seed, kinds=spec.faults, actors=spec.actors,
                                budget_s=spec.budget_s, max_batches=spec.max_batches, out=Path(spec.out),
                                command=alone, on_batch=on_batch)
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=found.batches, operations=found.operations,
                        elapsed_s=found.elapsed_s, verdict=found.verdict, found=found if found.findings else None,
                        history=found.history, host=socket.gethostname())


def _xmemo_shard(spec: ShardSpec, publish: _Publish) -> ShardOutcome:
    from simulations.xmemo.campaign import run_campaign
    from simulations.xmemo.shrink import shrink
    from simulations.xmemo.targets import reference_factory

    factory = load_factory(spec.factory) if spec.factory else reference_factory
    run = run_campaign(seed=spec.seed, budget_s=spec.budget_s, max_batches=spec.max_batches, factory=factory,
                             on_batch=lambda seconds, operations: publish(seconds, operations, None),
                             segment_batches=spec.segment)
    found = None
    if run.finding is not None:
        publish(run.elapsed_s, run.operations, run.finding.requirement, force=True)
        found = shrink(run, factory)
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=run.batches, operations=run.operations,
                        elapsed_s=run.elapsed_s, verdict=Verdict.ILLEGAL if run.findings else Verdict.OK, found=found,
                        host=socket.gethostname())


def _clients_shard(spec: ShardSpec, publish: _Publish) -> ShardOutcome:
    """The remote client's races (``aidememo-sim clients``): embedded under the shard's seed, or
    in the shard's own project on the server. They are not shrunk: the shard's seed is the case."""
    from aidememo_client.client import AideMemoClient
    from simulations.campaign import fresh_run_id
    from simulations.clients import run_client_campaign
    from simulations.targets import EmbeddedTarget, Target

    actors = ("agent-a", "agent-b", "agent-c")
    client_class = load_factory(spec.factory, "client class") if spec.factory else AideMemoClient
    target: Target = (EmbeddedTarget(actors, seed=spec.seed) if spec.url is None else
                      HttpTarget(spec.url, str(spec.project), spec.tokens, timeout_s=spec.timeout_s))
    try:
        run = run_client_campaign(target, seed=spec.seed, run_id="r" if spec.url is None else fresh_run_id(spec.seed),
                                  rounds=spec.rounds, workers=spec.clients, loss=spec.loss, budget_s=spec.budget_s,
                                  client_class=client_class,
                                  on_round=lambda seconds, operations: publish(seconds, operations, None))
    finally:
        target.close()
    return ShardOutcome(index=spec.index, seed=spec.seed, batches=run.rounds, operations=len(run.history),
                        elapsed_s=run.elapsed_s, verdict=Verdict.OK if run.clean else Verdict.ILLEGAL,
                        found=None if run.clean else run, host=socket.gethostname())


def _violated_word(found: Found | None) -> str | None:
    if found is None:
        return None
    if isinstance(found, XMemoRun):
        return found.finding.requirement if found.finding is not None else "xmemo"
    if isinstance(found, ClientRun):
        return "client" if found.finding is None else found.finding.kind
    if isinstance(found, FaultFound):
        return found.findings[0].rule if found.findings else "faults"
    return found.finding.kind if found.finding is not None else "finding"


class _Publish:
    """A running shard's counts, sent as Dask worker events (``log_event``) on the hunt's topic at
    most every ``PUBLISH_S``; the coordinator subscribes to the topic (``subscribe_topic``). Outside
    a Dask worker (a shard run in-process) it sends nothing."""

    def __init__(self, spec: ShardSpec, send: Callable[[str, object], None] | None) -> None:
        self._spec, self._send = spec, send
        self._last = float("-inf")
        self._found: str | None = None

    def __call__(self, seconds: float, operations: int, found: str | None, *, force: bool = False,
                 done: bool = False) -> None:
        self._found = found or self._found
        if self._send is None or self._spec.topic is None:
            return
        now = time.monotonic()
        if not force and now - self._last < PUBLISH_S:
            return
        self._last = now
        self._send(self._spec.topic, {"index": self._spec.index, "operations": operations,
                                      "seconds": round(seconds, 3), "found": self._found, "done": done})


def _worker() -> Any | None:
    """The Dask worker running this shard, or None (a shard run in-process)."""
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):  # not on a Dask worker
        return None


def _publisher(spec: ShardSpec) -> _Publish:
    worker = None if spec.topic is None else _worker()
    return _Publish(spec, None if worker is None else worker.log_event)


# CPython 3.11's sys._current_frames can run the garbage collector while it holds the runtime's
# thread-list lock; a finalizer that lets go of the GIL then deadlocks the whole process
# (python/cpython#106883). A Dask worker's statistical profiler calls it every 10 ms while a task
# runs, and a shard runs many threads and drops SQLite connections: on 3.11 hunts hung for good
# on a loaded machine (docs/simulations.md, workers on Python 3.11). distributed itself keeps its event-loop profiler
# off on 3.11 for this reason; the task profiler it leaves on.
_PROFILER_DEADLOCKS = sys.version_info[:2] == (3, 11)


def _stop_worker_profiler() -> None:
    """On 3.11, stop this Dask worker's task profiler (for the rest of the worker's life: starting
    it again between shards would reopen the window). Elsewhere, and off a worker, nothing."""
    worker = _worker() if _PROFILER_DEADLOCKS else None
    if worker is None:
        return
    profiler = worker.periodic_callbacks.get("profile")
    if profiler is None or not profiler.is_running():
        return
    stopped = threading.Event()

    def stop() -> None:  # on the worker's event loop: tornado's callbacks are not thread-safe
        profiler.stop()
        stopped.set()
    worker.loop.add_callback(stop)
    stopped.wait(10)
