"""A fault campaign: the race campaign against a served target behind the fault proxy, with the
nemesis injecting the schedule's faults, the audits after each restart and at the end, and the
reports (``report``).

The fault schedule comes from the printed seed (``schedule``), so the command that ran the
campaign is the one that replays it, faults and all. Which operation a fault meets, and so the
history, is the network's; the schedule and, for a server that keeps its promises or breaks one
every time, the verdict, are not.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from simulations.campaign import Finding, run_campaign
from simulations.errors import SimulationError
from simulations.faults.nemesis import FaultFinding, FaultTarget, Nemesis, Server
from simulations.faults.proxy import FaultProxy
from simulations.faults.schedule import FaultSchedule
from simulations.linearizability.checker import Verdict
from simulations.targets import HttpTarget

__all__ = ["Batches", "FaultRun", "REQUIREMENTS", "all_findings", "clock_refusal", "count_outcomes",
           "run_fault_campaign"]

# The requirements a finding of the campaign's own checks breaks, by its kind (campaign.Finding).
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "linearizability": ("AM-HO-2", "AM-HO-3", "AM-HO-4", "AM-HO-5", "AM-HL-REV-1"),
    "receipts": ("AM-CMD-2", "AM-CMD-8", "AM-HO-6"),
    "revision order": ("AM-RACE-2",),
    "change feed": ("AM-RACE-1",),
}



def all_findings(nemesis: Nemesis, finding: Finding | None) -> list[FaultFinding]:
    """The campaign's own finding first (with the requirements its kind breaks), then the audits'."""
    found = [FaultFinding(finding.kind, REQUIREMENTS.get(finding.kind, ()), finding.explanation)] if finding else []
    return [*found, *nemesis.findings]

class Rounds(Protocol):
    """What the reports read of the campaign under the faults: its batches (rounds) and time."""

    @property
    def batches(self) -> int: ...

    @property
    def elapsed_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Batches:
    """``Rounds`` of a campaign whose own result counts otherwise (the clients' rounds, XMemo's
    batches without its census)."""

    batches: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class FaultRun:
    """What a fault campaign did and found."""

    result: Rounds
    nemesis: Nemesis
    answered: int
    failed: int
    indeterminate: int
    verdict: Verdict
    findings: tuple[FaultFinding, ...]
    started: float

    def summary(self) -> str:
        return (f"{self.nemesis.summary()}; {self.answered} operations answered, {self.failed} failed, "
                f"{self.indeterminate} indeterminate; verdict {self.verdict.value.upper()}")

    def recovery(self) -> str | None:
        times = self.nemesis.recoveries
        if not times:
            return None
        return (f"recovery after {len(times)} restarts (kill to the first write sent after it that was answered): "
                f"median {statistics.median(times):.2f} s, max {max(times):.2f} s")


def run_fault_campaign(*, target: HttpTarget, server: Server | None, kinds: tuple[str, ...], seed: int, actors: int,
                       budget_s: float, max_batches: int | None, history_file: Path, started: float,
                       progress: Callable[[str], None] | None = None, keep: frozenset[int] | None = None,
                       on_batch: Callable[[float, int], None] | None = None) -> FaultRun:
    """Run the campaign on ``target`` behind a fault proxy, ``kinds`` injected from ``seed``; with
    ``server`` (the target file's first served server), the proxy balances over it and its others.
    ``keep``: only the faults of these batches (a shrunk schedule); ``on_batch(seconds,
    operations)`` hears of every batch (a hunt's shard publishes its progress with it).

    Raises:
        SimulationError: the server did not come back after a restart, or the history file failed.
    """
    from conformance.errors import ConformanceError

    servers = () if server is None else (server, *server.others)
    proxy = FaultProxy(*([s.url for s in servers] or [target.url])).start()
    faulty = FaultTarget(proxy.url, target.project, target.tokens, timeout_s=target.timeout_s, started=started)
    schedule = FaultSchedule(seed, kinds, servers=len(servers) or 1, keep=keep)
    nemesis = Nemesis(schedule=schedule, target=faulty, proxy=proxy, servers=servers)
    try:
        try:
            result = run_campaign(seed=seed, actors=actors, budget_s=budget_s, max_batches=max_batches,
                                  target=faulty, progress=progress, history_file=history_file, hooks=nemesis,
                                  on_batch=on_batch)
            nemesis.final_audit()
        except ConformanceError as exc:  # a restart that never answered /health again
            raise SimulationError(str(exc)) from None
    finally:
        proxy.close()
    nemesis.measure_recoveries()
    findings = all_findings(nemesis, result.finding)
    answered, failed, indeterminate = count_outcomes(history_file)
    verdict = Verdict.ILLEGAL if findings else result.verdict
    return FaultRun(result, nemesis, answered, failed, indeterminate, verdict, tuple(findings), started)


def clock_refusal(kinds: tuple[str, ...], config: Path | None) -> str | None:
    """Why ``kinds`` cannot run against ``config`` (None: they can): moving the test clock needs a
    target file that claims the ``test-clock`` capability (the clock route is a test extension,
    never a production server's)."""
    import tomllib

    from simulations.faults.schedule import CLOCK_KINDS

    wanted = [kind for kind in kinds if kind in CLOCK_KINDS]
    if not wanted:
        return None
    claimed = False
    if config is not None:
        try:
            with config.open("rb") as file:
                capabilities = tomllib.load(file).get("capabilities")
            claimed = isinstance(capabilities, dict) and capabilities.get("test-clock") is True
        except (OSError, tomllib.TOMLDecodeError):
            return None  # the target file's own loader says what is wrong with it
    return None if claimed else (f"--faults {wanted[0]} needs a target file that claims the test-clock capability "
                                 "([capabilities] test-clock = true); give --config with one")


def count_outcomes(history_file: Path) -> tuple[int, int, int]:
    """(answered 2xx, answered with a refusal or error, indeterminate) over a history file.

    Raises:
        SimulationError: the file cannot be read.
    """
    answered = failed = indeterminate = 0
    try:
        with history_file.open(encoding="utf-8") as lines:
            next(lines, None)  # the header
            for line in lines:
                if not line.strip():
                    continue
                output = json.loads(line).get("output")
                if output is None:
                    indeterminate += 1
                elif isinstance(output, dict) and output.get("http") == 200:
                    answered += 1
                else:
                    failed += 1
    except (OSError, ValueError) as exc:
        raise SimulationError(f"cannot read the history back from {history_file}: {exc}") from None
    return answered, failed, indeterminate
