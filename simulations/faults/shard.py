"""A fault campaign as one shard of a hunt (``aidememo-sim run --faults ... --workers N``, and
``clients`` and ``xmemo run``), on a server of its own.

When the target file's ``[serve]`` command names ``{port}`` and ``{dir}``, each shard starts the
command on a free port and a fresh data folder of its own (``targets.served_apart``), provisions
its project there, runs the fault campaign under its own seed against it (its kills and pauses
hit no other shard's server), and, when it finds something, shrinks its fault schedule by reruns
against that same server and writes its replay file, as a one-process run does; then it writes
its reports and stops the server. What comes back to the coordinator is ``FaultFound``: plain
values, since the campaign's proxy and threads stay on the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from simulations.clients import ClientClass
from simulations.errors import SimulationError
from simulations.faults.clients import run_client_faults
from simulations.faults.nemesis import FaultFinding, Server
from simulations.faults.replay import FaultCase, export_finding, rerun
from simulations.faults.report import write_reports
from simulations.faults.run import FaultRun, run_fault_campaign
from simulations.faults.xmemo import run_xmemo_faults, xmemo_target
from simulations.linearizability.checker import Verdict
from simulations.targets import HttpTarget, served_apart, target_from_config

__all__ = ["FaultFound", "run_client_fault_shard", "run_fault_shard", "run_xmemo_fault_shard"]

CLIENT_ACTORS = ("agent-a", "agent-b", "agent-c")  # the clients' races: a sender, a receiver, a bystander
OnBatch = Callable[[float, int], None] | None  # told (seconds, operations) after each batch or round


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultFound:
    """What one shard's fault campaign did and found, and where its reports are."""

    seed: int
    findings: tuple[FaultFinding, ...]
    summary: str
    verdict: Verdict
    batches: int
    operations: int
    elapsed_s: float
    report: str  # its faults.json, on the worker's machine
    history: str | None  # the run's history file (the clients' races keep theirs in memory)
    replay: tuple[str, ...] = ()  # its shrunk replay file and the commands that run it, as lines to print


def run_fault_shard(*, config: Path, seed: int, kinds: tuple[str, ...], actors: int, budget_s: float,
                    max_batches: int | None, out: Path, command: str, on_batch: OnBatch = None) -> FaultFound:
    """The fault campaign of seed ``seed`` against a server of ``config`` started for it alone;
    ``command`` is the one that runs it again by itself (its reports' replay line); ``on_batch``
    hears of every batch (the shard publishes its progress with it).

    Raises:
        SimulationError: the server did not come up, or came back from no restart; a bad file.
    """
    history = out / f"faults-seed-{seed}" / "history.jsonl"

    def campaign(server: Server, environ: Mapping[str, str], started: float) -> FaultRun:
        target = _target(config, actors, environ)
        try:
            return run_fault_campaign(target=target, server=server, kinds=kinds, seed=seed, actors=actors,
                                      budget_s=budget_s, max_batches=max_batches, history_file=history,
                                      started=started, on_batch=on_batch)
        finally:
            target.close()

    case = FaultCase(seed=seed, kinds=kinds, servers=1, actors=actors, batches=0, budget_s=budget_s, keep=None,
                     rules=())
    return _apart(config, seed, out / f"faults-seed-{seed}", command, campaign, str(history),
                  (case, lambda environ: _target(config, actors, environ), None))


def run_client_fault_shard(*, config: Path, seed: int, kinds: tuple[str, ...], rounds: int, clients: int,
                           loss: float, client_class: ClientClass, budget_s: float, out: Path,
                           command: str, on_batch: OnBatch = None, client_name: str | None = None) -> FaultFound:
    """The clients' fault campaign of seed ``seed`` (``clients --faults``) against a server of
    ``config`` started for it alone; ``client_name``: the FILE.py:NAME of ``client_class`` when the
    command line named one (its replay must name it again).

    Raises:
        SimulationError: the server did not come up, or came back from no restart; a bad file.
    """
    def campaign(server: Server, environ: Mapping[str, str], started: float) -> FaultRun:
        target = _target(config, len(CLIENT_ACTORS), environ)
        try:
            return run_client_faults(target=target, server=server, kinds=kinds, seed=seed, rounds=rounds,
                                     workers=clients, loss=loss, client_class=client_class, budget_s=budget_s,
                                     started=started, on_round=on_batch)
        finally:
            target.close()

    case = FaultCase(seed=seed, kinds=kinds, servers=1, actors=len(CLIENT_ACTORS), batches=0, budget_s=budget_s,
                     keep=None, rules=(), command="clients", clients=clients, loss=loss, client=client_name)
    return _apart(config, seed, out / f"clients-faults-seed-{seed}", command, campaign, None,
                  (case, lambda environ: _target(config, len(CLIENT_ACTORS), environ), client_class))


def run_xmemo_fault_shard(*, config: Path, seed: int, kinds: tuple[str, ...], budget_s: float,
                          max_batches: int | None, out: Path, command: str, on_batch: OnBatch = None) -> FaultFound:
    """The XMemo races' fault campaign of seed ``seed`` (``xmemo run --faults``) against a server
    of ``config`` started for it alone, with keys of a fresh owner bootstrapped there.

    Raises:
        SimulationError: the server did not come up, or came back from no restart; a bad file.
    """
    def campaign(server: Server, environ: Mapping[str, str], started: float) -> FaultRun:
        url, keys, timeout_s = xmemo_target(config, environ)
        return run_xmemo_faults(url=url, keys=keys, timeout_s=timeout_s, server=server, kinds=kinds, seed=seed,
                                budget_s=budget_s, max_batches=max_batches, started=started, on_batch=on_batch)

    case = FaultCase(seed=seed, kinds=kinds, servers=1, actors=0, batches=0, budget_s=budget_s, keep=None, rules=(),
                     command="xmemo")
    return _apart(config, seed, out / f"xmemo-faults-seed-{seed}", command, campaign, None,
                  (case, lambda environ: xmemo_target(config, environ), None))


def _target(config: Path, actors: int, environ: Mapping[str, str]) -> HttpTarget:
    target = target_from_config(config, actors, environ=environ)
    if target is None:
        raise SimulationError(f"{config} names the embedded reference: a fault campaign needs a server")
    return target


# How a shard's finding is run again: its case, a fresh target under the shard's environment, the client class.
Again = tuple[FaultCase, Callable[[Mapping[str, str]], object], ClientClass | None]


def _apart(config: Path, seed: int, folder: Path, command: str,
           campaign: Callable[[Server, Mapping[str, str], float], FaultRun], history: str | None,
           again: Again) -> FaultFound:
    started = time.monotonic()
    lines: list[str] = []
    with served_apart(config, folder) as (server, environ):
        run = campaign(server, environ, started)
        if run.findings:  # shrunk on this shard's server while it is up, as a one-process run does
            case, target, client_class = again
            case = replace(case, servers=1 + len(server.others))
            try:
                export_finding(run, case, rerun(target=lambda: target(environ), server=server,
                                                client_class=client_class),
                               out=folder, config=config, say=lines.append)
            except SimulationError as exc:
                lines.append(f"its fault schedule was not shrunk: {exc}")
    paths, _ = write_reports(run, folder, command=command)
    return FaultFound(seed=seed, findings=run.findings, summary=run.summary(), verdict=run.verdict,
                      batches=run.result.batches, operations=run.answered + run.failed + run.indeterminate,
                      elapsed_s=time.monotonic() - started, report=str(paths["fault report"]), history=history,
                      replay=tuple(lines))
