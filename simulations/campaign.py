"""Campaigns: plan, run and check batches until a violation or the budget runs out.

A run is fully described by (target, seed, plan). On the embedded reference the plan and the
seed replay the same interleaving; ``rerun`` executes a recorded plan without planning again.
Checking is incremental: after each batch only the handoffs it touched are searched further,
from the search state kept since the last batch, and the receipt rules see only the new
answers, so a campaign keeps its rate however long it runs.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from simulations.linearizability.checker import Checker, Verdict
from simulations.errors import SimulationError
from simulations.execution import execute_batch
from simulations.linearizability.history import Header, Operation, Recorder, dump_history, parse_history
from simulations.ledger import LEDGER
from simulations.plan import RUN_ID, Batch, Plan, actor_names, workers_for
from simulations.planner import Planner, setup
from simulations.feed import FeedFollower
from simulations.receipts import FeedEntry, ReceiptChecks, Violation
from simulations.targets import EmbeddedTarget, HttpTarget, LedgerFactory, Target, reference_factory

__all__ = ["Finding", "HistoryCheck", "RunResult", "batch_seed", "check_history", "fresh_run_id", "rerun",
           "rerun_over_http", "run_campaign", "violations_by_rule"]


def fresh_run_id(seed: int) -> str:
    # Not from the seed on purpose: a server keeps every receipt, so a rerun needs new ids.
    return f"s{seed}x{random.SystemRandom().randrange(16**8):08x}"


def batch_seed(seed: int, index: int) -> int:
    """The scheduler's seed for batch ``index``: independent streams from one printed seed."""
    return (seed * 1_000_003 + index) & 0xFFFF_FFFF_FFFF


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A violation: which operations, and why."""

    kind: str  # "linearizability", or a receipts.py rule: "receipts", "revision order", "change feed"
    witness: tuple[int, ...]
    explanation: str
    # history index -> the answers the model would have given it (where the model knows)
    expected: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    seed: int
    plan: Plan
    history: tuple[Operation, ...]
    decisions: tuple[tuple[int, ...], ...]
    verdict: Verdict
    finding: Finding | None
    elapsed_s: float
    feed: tuple[FeedEntry, ...] = ()  # the change-feed entries read during the run
    # Set when ``history`` (and ``feed``) were not kept: a campaign that found nothing, whose
    # history is in its history file.
    recorded: int | None = None

    @property
    def operations(self) -> int:
        """How many operations the run recorded, kept or not."""
        return len(self.history) if self.recorded is None else self.recorded


class HistoryCheck:
    """The ledger model per handoff, and the receipt rules across handoffs, on a growing history.

    ``explain=False`` gives the verdict only (the witness is then the whole partition): what
    shrinking needs, many times over. With ``history_file`` (where the operations are appended
    before they are added) neither check keeps the operations it has settled; a violation reads
    the ones it names back from the file.
    """

    def __init__(self, *, explain: bool = True, history_file: Path | None = None) -> None:
        self._reread = None if history_file is None else functools.partial(read_back, history_file)
        self.checker: Checker[object] = Checker(LEDGER, reread=self._reread)  # type: ignore[arg-type]
        self.receipts = ReceiptChecks(keep=history_file is None)
        self.explain = explain
        self.finding: Finding | None = None

    def add(self, ops: Sequence[Operation]) -> None:
        self.checker.add(ops)
        self._note(self.receipts.add(ops))

    def feed(self, entries: Sequence[FeedEntry], *, complete: bool = False) -> None:
        """Change-feed entries read since the last call; ``complete``: the feed was read to its
        head after the last answer, so a receipt without an entry is a violation."""
        self._note(self.receipts.feed(entries))
        if complete:
            self._note(self.receipts.missing_from_feed())

    def _note(self, violations: Sequence[Violation]) -> None:
        if self.finding is not None or not violations:
            return
        violation = violations[0]
        named = list(violation.operations)
        ops = ({i: self.receipts.history[i] for i in named} if self._reread is None
               else dict(zip(named, self._reread(named))))
        text = violation.why + ":\n" + "\n".join(
            f"  #{i} (client {ops[i].client}): {LEDGER.describe_operation(ops[i].input, ops[i].output)}"
            for i in named)
        self.finding = Finding(kind=violation.kind, witness=tuple(sorted(violation.operations)), explanation=text)

    def run(self, budget_s: float = 10.0) -> tuple[Verdict, Finding | None]:
        if self.finding is not None:
            return Verdict.ILLEGAL, self.finding
        self.checker.advance(budget_s, explain_budget_s=min(5.0, budget_s) if self.explain else 0)
        violation = self.checker.violation
        if violation is None:
            return self.checker.verdict, None
        text = violation.explanation
        if self.explain and not violation.minimal:
            text += "\n(the shrinking budget ran out: the set above may list more operations than necessary)"
        self.finding = Finding(kind="linearizability", witness=violation.witness, explanation=text,
                               expected=violation.expected)
        return Verdict.ILLEGAL, self.finding


def violations_by_rule(history: Sequence[Operation], feed: Sequence[FeedEntry]) -> dict[str, int]:
    """How many violations each rule finds in a run (the ledger model: 0 or 1), to show which
    property a race breaks and that the others hold."""
    receipts = ReceiptChecks()
    found = receipts.add(history) + receipts.feed(feed) + receipts.missing_from_feed()
    counts = {"linearizability": 0, "receipts": 0, "revision order": 0, "change feed": 0}
    for violation in found:
        counts[violation.kind] += 1
    checker: Checker[object] = Checker(LEDGER)  # type: ignore[arg-type]
    checker.add(history)
    counts["linearizability"] = int(checker.run(explain_budget_s=0).verdict is Verdict.ILLEGAL)
    return counts


def check_history(history: Sequence[Operation], budget_s: float = 10.0,
                  explain: bool = True) -> tuple[Verdict, Finding | None]:
    """The receipt rules, then the ledger model, over a whole history (without its feed)."""
    check = HistoryCheck(explain=explain)
    check.add(history)
    return check.run(budget_s)


def run_campaign(
    *,
    seed: int,
    actors: int = 3,
    budget_s: float = 20.0,
    max_batches: int | None = None,
    factory: LedgerFactory = reference_factory,
    target: HttpTarget | None = None,
    progress: Callable[[str], None] | None = None,
    on_batch: Callable[[float, int], None] | None = None,
    history_file: Path | None = None,
) -> RunResult:
    """Plan and run batches until a violation, ``max_batches`` or ``budget_s``.

    ``on_batch(seconds since start, operations so far)`` hears about every batch (the bench
    measures rates with it). ``history_file``: every batch's operations are appended there as
    JSON lines (the format ``aidememo-sim check`` reads) as soon as the batch ends, so a run that
    is stopped or killed still leaves its history; the run keeps only what its checks need, and
    its result has the history (read back) only with a violation, else its length (``recorded``).

    Raises:
        SimulationError: when the history file cannot be written.
    """
    started = time.monotonic()
    rng = random.Random(seed)
    tgt, names, run_id = _open_target(seed, actors, factory, target)
    workers = workers_for(names)
    keep = history_file is None
    recorder = Recorder(keep=keep)
    check = HistoryCheck(history_file=history_file)
    batches: list[Batch] = []
    decisions: list[tuple[int, ...]] = []
    verdict, finding = Verdict.OK, None
    last_report = started
    operations = 0
    feed: list[FeedEntry] = []
    sink = _history_sink(history_file)
    try:
        setup(tgt, run_id)
        follower = FeedFollower(tgt)
        planner = Planner(target=tgt, run_id=run_id, rng=rng, workers=workers)
        while max_batches is None or len(batches) < max_batches:
            if time.monotonic() - started > budget_s * 0.8:
                break  # the rest of the budget is for the last check and the shrinking
            planner.refresh()
            batch = planner.next_batch()
            batches.append(batch)
            decisions.append(tuple(execute_batch(tgt, batch, recorder, batch_seed(seed, len(batches) - 1))))
            new = recorder.take()
            operations += len(new)
            if sink is not None:
                _append(sink, new)
            check.add(new)
            entries = follower.poll()
            feed.extend(entries if keep else ())
            check.feed(entries)
            verdict, finding = check.run()
            if on_batch is not None:
                on_batch(time.monotonic() - started, operations)
            if progress is not None and time.monotonic() - last_report > 2.0:
                last_report = time.monotonic()
                progress(f"  {last_report - started:5.1f} s: {len(batches)} batches, {operations} operations, "
                         f"{verdict.value}")
            if finding is not None:
                break
        if finding is None:
            entries = follower.poll()
            feed.extend(entries if keep else ())
            check.feed(entries, complete=True)
            verdict, finding = check.run(budget_s=max(1.0, budget_s * 0.1))
    finally:
        tgt.close()
        if sink is not None:
            sink.close()
    history = _kept_history(recorder, history_file, finding)
    return RunResult(
        seed=seed, plan=Plan(actors=names, workers=workers, batches=tuple(batches), run_id=run_id, project=tgt.project),
        history=history, decisions=tuple(decisions), verdict=verdict, finding=finding,
        elapsed_s=time.monotonic() - started, feed=tuple(feed), recorded=None if history else operations,
    )


def _kept_history(recorder: Recorder, history_file: Path | None, finding: Finding | None) -> tuple[Operation, ...]:
    if recorder.keep:
        return tuple(recorder.history())
    if finding is None or history_file is None:
        return ()
    return tuple(read_back(history_file))  # the shrinker and the exports start from the whole history


def _open_target(seed: int, actors: int, factory: LedgerFactory,
                 target: HttpTarget | None) -> tuple[Target, tuple[str, ...], str]:
    """The run's target, its actors and its run id (fresh on a long-lived server)."""
    if target is None:
        names = actor_names(actors)
        return EmbeddedTarget(names, seed=seed, factory=factory), names, RUN_ID
    return target, target.actors, fresh_run_id(seed)


def _history_sink(path: Path | None) -> IO[str] | None:
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sink = path.open("w", encoding="utf-8")
        dump_history((), sink, Header(model="ledger"))
    except OSError as exc:
        raise SimulationError(f"cannot write the history to {path}: {exc.strerror}") from exc
    return sink


def read_back(path: Path, indices: Sequence[int] | None = None) -> list[Operation]:
    """Operations of a history file by their index (all of them without ``indices``), read a
    line at a time so that only those asked for are built.

    Raises:
        SimulationError: when the file cannot be read back or lacks an operation asked for.
    """
    wanted = None if indices is None else set(indices)
    found: dict[int, Operation] = {}
    try:
        with path.open(encoding="utf-8") as lines:
            index = -1
            for number, line in enumerate(lines, start=1):
                if number == 1 or not line.strip():
                    continue  # the header _history_sink wrote
                index += 1
                if wanted is None or index in wanted:
                    found[index] = parse_history([line], f"{path}:{number}")[1][0]
    except OSError as exc:
        raise SimulationError(f"cannot read the history back from {path}: {exc.strerror}") from exc
    order = range(len(found)) if indices is None else indices
    missing = [i for i in order if i not in found]
    if missing:
        raise SimulationError(f"{path} has no operation #{missing[0]}")
    return [found[i] for i in order]


def _append(sink: IO[str], ops: Sequence[Operation]) -> None:
    try:
        dump_history(ops, sink)
        sink.flush()
    except OSError as exc:
        raise SimulationError(f"cannot write the history to {sink.name}: {exc.strerror}") from exc


@dataclass(frozen=True, slots=True)
class _Executed:
    history: list[Operation]
    decisions: list[tuple[int, ...]]
    verdict: Verdict
    finding: Finding | None
    feed: list[FeedEntry]


def _execute(target: Target, plan: Plan, seed: int, schedule: Sequence[Sequence[int]], explain: bool,
             retime: bool = False) -> _Executed:
    recorder = Recorder()
    decisions = []
    check = HistoryCheck(explain=explain)
    try:
        setup(target, plan.run_id)
        follower = FeedFollower(target)
        previous: int | None = None
        for index, batch in enumerate(plan.batches):
            if retime and batch.clock_ms is not None:
                # A server's clock has moved on since the plan was made and only moves forward:
                # each batch keeps its step from the one before, from the server's time now,
                # and the model is told that time (as the planner does). A server without the
                # test clock gets no steps, and the model is told it does not know the time.
                now = target.now_ms()
                step = 0 if previous is None else max(0, batch.clock_ms - previous)
                previous = batch.clock_ms
                batch = batch.at(None if now is None else now + step)
            script = schedule[index] if index < len(schedule) else ()
            decisions.append(tuple(execute_batch(target, batch, recorder, batch_seed(seed, index), script)))
            check.add(recorder.take())
        feed = follower.poll()
        check.feed(feed, complete=True)
    finally:
        target.close()
    verdict, finding = check.run()
    return _Executed(recorder.history(), decisions, verdict, finding, feed)


def rerun(plan: Plan, seed: int, factory: LedgerFactory = reference_factory,
          schedule: Sequence[Sequence[int]] = (), explain: bool = True) -> RunResult:
    """Execute a recorded plan on a fresh embedded ledger, batch seeds as in the original run.

    ``schedule`` (per batch, the workers chosen at each point) is followed where it applies.
    """
    started = time.monotonic()
    done = _execute(EmbeddedTarget(plan.actors, seed=seed, factory=factory), plan, seed, schedule, explain)
    return RunResult(seed=seed, plan=plan, history=tuple(done.history), decisions=tuple(done.decisions),
                     verdict=done.verdict, finding=done.finding, elapsed_s=time.monotonic() - started,
                     feed=tuple(done.feed))


def rerun_over_http(plan: Plan, seed: int, target: HttpTarget, explain: bool = True) -> RunResult:
    """Execute a recorded plan against a URL, rebased into the target's project with fresh ids
    (the server keeps old receipts) and moved to the server's clock.

    Raises:
        SimulationError: when the target has no token for an actor of the plan, or setup fails.
    """
    started = time.monotonic()
    missing = [a for a in plan.identities if a not in target.tokens]
    if missing:
        raise SimulationError(f"the target has no token for actor {missing[0]!r} of the plan "
                              f"(it has {', '.join(sorted(target.tokens))})")
    fresh = plan.rebased(fresh_run_id(seed), target.project)
    done = _execute(target.for_actors(plan.actors), fresh, seed, (), explain, retime=True)
    # The plan keeps its own clock: retimed again from it, a later rerun keeps the same steps.
    return RunResult(seed=seed, plan=fresh, history=tuple(done.history), decisions=(), verdict=done.verdict,
                     finding=done.finding, elapsed_s=time.monotonic() - started, feed=tuple(done.feed))
