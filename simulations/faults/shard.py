"""A fault campaign as one shard of a hunt (``aidememo-sim run --faults ... --workers N``), on a
server of its own.

When the target file's ``[serve]`` command names ``{port}`` and ``{dir}``, each shard starts the
command on a free port and a fresh data folder of its own (``targets.served_apart``), provisions
its project there, runs the fault campaign under its own seed against it (its kills and pauses
hit no other shard's server), writes its reports and stops the server. What comes back to the
coordinator is ``FaultFound``: plain values, since the campaign's proxy and threads stay on the
worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from simulations.errors import SimulationError
from simulations.faults.nemesis import FaultFinding
from simulations.faults.report import write_reports
from simulations.faults.run import run_fault_campaign
from simulations.targets import served_apart, target_from_config

__all__ = ["FaultFound", "run_fault_shard"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultFound:
    """What one shard's fault campaign did and found, and where its reports are."""

    seed: int
    findings: tuple[FaultFinding, ...]
    summary: str
    verdict: str
    batches: int
    operations: int
    elapsed_s: float
    report: str  # its faults.json, on the worker's machine
    history: str


def run_fault_shard(*, config: Path, seed: int, kinds: tuple[str, ...], actors: int, budget_s: float,
                    max_batches: int | None, out: Path, command: str) -> FaultFound:
    """The fault campaign of seed ``seed`` against a server of ``config`` started for it alone;
    ``command`` is the one that runs it again by itself (its reports' replay line).

    Raises:
        SimulationError: the server did not come up, or came back from no restart; a bad file.
    """
    started = time.monotonic()
    folder = out / f"faults-seed-{seed}"
    history = folder / "history.jsonl"
    with served_apart(config, folder) as (server, environ):
        target = target_from_config(config, actors, environ=environ)
        if target is None:
            raise SimulationError(f"{config} names the embedded reference: a fault campaign needs a server")
        try:
            run = run_fault_campaign(target=target, server=server, kinds=kinds, seed=seed, actors=actors,
                                     budget_s=budget_s, max_batches=max_batches, history_file=history,
                                     started=started)
        finally:
            target.close()
    paths, _ = write_reports(run, folder, command=command)
    return FaultFound(seed=seed, findings=run.findings, summary=run.summary(), verdict=run.verdict.value,
                      batches=run.result.batches, operations=run.answered + run.failed + run.indeterminate,
                      elapsed_s=time.monotonic() - started, report=str(paths["fault report"]), history=str(history))
