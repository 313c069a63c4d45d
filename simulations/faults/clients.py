"""Faults under the remote client's races (``aidememo-sim clients --faults``).

The clients campaign (``simulations.clients``) runs against the served target through the fault
proxy, a round per batch of the schedule: the nemesis kills, pauses or arms the proxy once the
round's handoff is sent, while the receiver's clients race on it. A POST whose answer is lost is
retried once with the identical body by the client itself (the protocol's one retry), which must
meet the stored receipt; a call still in doubt is rerun (a user running the command again) once
the fault is over. Beside the checks of ``run --faults`` (receipts after restarts, the feed, one
live claim), a later run is checked at the end: for every handoff, a fresh client of the
receiver accepts and returns again with the round's evidence, and each must answer
``recovered: true`` with no request that changes the handoff (AML-REM-4).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aidememo_client.client import AideMemoClient, AideMemoClientError
from simulations.campaign import fresh_run_id
from simulations.clients import ClientClass, ClientRun, TargetTransport, run_client_campaign
from simulations.errors import SimulationError
from simulations.faults.nemesis import FaultFinding, FaultTarget, Nemesis, Server
from simulations.faults.proxy import FaultProxy
from simulations.faults.run import Batches, FaultRun, all_findings
from simulations.faults.schedule import FaultSchedule
from simulations.linearizability.checker import Verdict
from simulations.linearizability.history import Operation
from simulations.targets import HttpTarget

__all__ = ["run_client_faults"]

LATER_RUN = ("AML-REM-4", "AM-CMD-2")
_CLOCK_TRIES = 5


class _ClientsTarget(FaultTarget):
    """The fault target of the clients' races: their workers read the test clock before each
    write, from their own threads, so a kill can meet a clock read too; it is read again once the
    fault is over (``quiet``), as the campaign reads it only between batches."""

    def now_ms(self) -> int | None:
        for _ in range(_CLOCK_TRIES - 1):
            try:
                return super().now_ms()
            except SimulationError:
                time.sleep(0.05)
        return super().now_ms()


def run_client_faults(*, target: HttpTarget, server: Server | None, kinds: tuple[str, ...], seed: int, rounds: int,
                      workers: int, loss: float, client_class: ClientClass, budget_s: float,
                      started: float, keep: frozenset[int] | None = None,
                      on_round: Callable[[float, int], None] | None = None) -> FaultRun:
    """The clients campaign on ``target`` behind a fault proxy, ``kinds`` injected from ``seed``
    (``keep``: only the faults of these rounds, a shrunk schedule; ``on_round(seconds,
    operations)``: told of every round)."""
    servers = () if server is None else (server, *server.others)
    proxy = FaultProxy(*([s.url for s in servers] or [target.url])).start()
    faulty = _ClientsTarget(proxy.url, target.project, target.tokens, timeout_s=target.timeout_s, started=started)
    nemesis = Nemesis(schedule=FaultSchedule(seed, kinds, servers=len(servers) or 1, keep=keep), target=faulty,
                      proxy=proxy, servers=servers)
    faulty.quiet = nemesis.wait  # the workers read the clock from their own threads
    run_id = fresh_run_id(seed)
    try:
        run = run_client_campaign(faulty, seed=seed, run_id=run_id, rounds=rounds, workers=workers, loss=loss,
                                  client_class=client_class, budget_s=budget_s, hooks=nemesis, settle=nemesis.wait,
                                  on_round=on_round)
        nemesis.final_audit()
        later = _later_runs(faulty, run_id, run.rounds)
    finally:
        proxy.close()
    nemesis.measure_recoveries()
    findings = all_findings(nemesis, run.finding)
    findings += [FaultFinding("the client's promise", LATER_RUN, problem) for problem in run.client_findings[:1]]
    findings += [FaultFinding("a later run recovers", LATER_RUN, problem) for problem in later[:1]]
    answered, failed, indeterminate = _outcomes(run)
    verdict = Verdict.ILLEGAL if findings else Verdict.OK
    return FaultRun(Batches(run.rounds, run.elapsed_s), nemesis, answered, failed, indeterminate, verdict,
                    tuple(findings), started)


def _outcomes(run: ClientRun) -> tuple[int, int, int]:
    """(answered 200, answered otherwise or failed before sending, indeterminate) of the history."""
    def outcome(op: Operation) -> int:
        return 2 if op.output is None else 0 if op.output.get("http") == 200 else 1

    counts = [0, 0, 0]
    for op in run.history:
        counts[outcome(op)] += 1
    return counts[0], counts[1], counts[2]


def _later_runs(target: HttpTarget, run_id: str, rounds: int) -> list[str]:
    """Every round's handoff ended completed by a succeeded return of the round's fact: a fresh
    client's accept and return again must each answer ``recovered: true``, sending nothing that
    moves the handoff's revision."""
    receiver = target.actors[1]
    fact_id = f"fact-{receiver}-{run_id}"  # simulations.planner.setup's fact of the receiver
    problems: list[str] = []
    transport = TargetTransport(target, receiver, 0)
    with AideMemoClient(target.url, "sim", target.project, transport=transport) as client:
        for index in range(rounds):
            handoff_id = f"handoff-client-{run_id}-{index}"  # simulations.clients._send's id
            problems += _later_run(client, handoff_id, fact_id)
    return problems


def _later_run(client: AideMemoClient, handoff_id: str, fact_id: str) -> list[str]:
    calls: list[tuple[str, Callable[[], object]]] = [
        ("accept", lambda: client.accept(handoff_id)),
        ("return", lambda: client.return_result(handoff_id, fact_id, "succeeded"))]
    try:
        before = client.status(handoff_id)["revision"]
    except AideMemoClientError as exc:
        return [f"{handoff_id}: reading it after the run failed: {exc}"]
    for verb, call in calls:
        try:
            answer = call()
        except AideMemoClientError as exc:
            return [f"{handoff_id}: a later {verb} of its completed work was refused: {exc}"]
        if not isinstance(answer, dict) or answer.get("recovered") is not True:
            return [f"{handoff_id}: a later {verb} of its completed work did not recover it: "
                    f"recovered {answer.get('recovered') if isinstance(answer, dict) else answer!r}"]
    after = client.status(handoff_id)["revision"]
    if after != before:
        return [f"{handoff_id}: a later accept and return that recovered moved its revision {before} to {after}"]
    return []
