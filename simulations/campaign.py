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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from refkit.files import open_fresh
from simulations.linearizability.checker import Checker, Verdict
from simulations.errors import SimulationError
from simulations.execution import execute_batch
from simulations.linearizability.history import Header, Operation, Recorder, dump_history, parse_history
from simulations.ledger import LEDGER
from simulations.plan import RUN_ID, SEGMENT_BATCHES, Batch, Plan, actor_names, batch_seed, segment_seed, workers_for
from simulations.planner import Planner, setup
from simulations.feed import FeedFollower
from simulations.receipts import FeedEntry, ReceiptChecks, Violation
from simulations.targets import EmbeddedTarget, HttpTarget, LedgerFactory, Target, reference_factory

__all__ = ["SEGMENT_BATCHES", "BatchHooks", "Finding", "HistoryCheck", "RunResult", "check_history", "fresh_run_id",
           "rerun", "rerun_over_http", "run_campaign", "segment_run_id", "segment_seed", "violations_by_rule"]


class BatchHooks(Protocol):
    """Told of each batch of a campaign (a fault campaign's nemesis): ``before`` it is sent and
    ``after`` it ended, by the batch's index in the run; ``after`` returning True stops the run."""

    def before(self, batch: int) -> None: ...

    def after(self, batch: int) -> bool: ...


def fresh_run_id(seed: int) -> str:
    # Not from the seed on purpose: a server keeps every receipt, so a rerun needs new ids.
    return f"s{seed}x{random.SystemRandom().randrange(16**8):08x}"


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
    # history is in its history file; the operations of the whole run.
    recorded: int | None = None
    # A segmented campaign's result is its last segment's (seed, plan, history, decisions):
    # which one, and the batches and operations of the segments before it.
    segment: int = 0
    earlier: tuple[int, int] = (0, 0)

    @property
    def operations(self) -> int:
        """How many operations the run recorded, kept or not, over every segment."""
        return self.earlier[1] + len(self.history) if self.recorded is None else self.recorded

    @property
    def batches(self) -> int:
        """How many batches the run sent, over every segment."""
        return self.earlier[0] + len(self.plan.batches)


class HistoryCheck:
    """The ledger model per handoff, and the receipt rules across handoffs, on a growing history.

    ``explain=False`` gives the verdict only (the witness is then the whole partition): what
    shrinking needs, many times over. With ``history_file`` (where the operations are appended
    before they are added) neither check keeps the operations it has settled; a violation reads
    the ones it names back from the file, where the checked operations begin at index ``first``.
    """

    def __init__(self, *, explain: bool = True, history_file: Path | None = None, first: int = 0) -> None:
        self._reread = None if history_file is None else functools.partial(_read_segment, history_file, first)
        self.checker = Checker(LEDGER, reread=self._reread)
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
    checker = Checker(LEDGER)
    checker.add(history)
    counts["linearizability"] = int(checker.run(explain_budget_s=0).verdict is Verdict.ILLEGAL)
    return counts


def check_history(history: Sequence[Operation], budget_s: float = 10.0,
                  explain: bool = True) -> tuple[Verdict, Finding | None]:
    """The receipt rules, then the ledger model, over a whole history (without its feed)."""
    check = HistoryCheck(explain=explain)
    check.add(history)
    return check.run(budget_s)


def segment_run_id(segment: int) -> str:
    """The run id of a segment's ids: every segment's own, so one history file holds them all
    and each handoff's operations stay one partition."""
    return RUN_ID if segment == 0 else f"{RUN_ID}{segment}"


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
    segment_batches: int = SEGMENT_BATCHES,
    hooks: BatchHooks | None = None,
) -> RunResult:
    """Plan and run batches until a violation, ``max_batches`` or ``budget_s``.

    ``on_batch(seconds since start, operations so far)`` hears about every batch (the bench
    measures rates with it). ``history_file``: every batch's operations are appended there as
    JSON lines (the format ``aidememo-sim check`` reads) as soon as the batch ends, so a run that
    is stopped or killed still leaves its history; the run keeps only what its checks need, and
    its result has the history (read back) only with a violation, else its length (``recorded``).
    ``hooks`` hear of each batch before and after it (a fault campaign's nemesis).
    On the embedded reference such a run is also cut into segments of ``segment_batches``
    batches (0: never), each on a fresh reference with its own seed and run id, checked on its
    own; the result is then the segment's (seed, plan, history), with ``earlier`` counting the
    segments before it.

    Raises:
        SimulationError: when the history file cannot be written.
    """
    run = _Run(seed=seed, started=time.monotonic(), budget_s=budget_s, rng=random.Random(seed),
               recorder=Recorder(keep=history_file is None), history_file=history_file,
               sink=_history_sink(history_file), progress=progress, on_batch=on_batch,
               segment_batches=segment_batches if history_file is not None and target is None else 0,
               hooks=hooks)
    segment: _Segment | None = None
    try:
        segment = run.open(0, actors, factory, target)
        while max_batches is None or run.batches + len(segment.batches) < max_batches:
            if time.monotonic() - run.started > budget_s * 0.8:
                break  # the rest of the budget is for the last check and the shrinking
            if run.segment_batches and len(segment.batches) >= run.segment_batches:
                if run.close(segment, budget_s=max(1.0, budget_s * 0.1)) is not None:
                    break
                index = segment.index + 1
                run.let_go(segment)
                segment = None  # nothing keeps it (nor closes it again, should the next one not open)
                segment = run.open(index, actors, factory, target)
            if run.batch(segment) is not None or run.stopped:
                break
        if segment.finding is None:
            run.close(segment, budget_s=max(1.0, budget_s * 0.1))
    finally:
        if segment is not None:
            segment.target.close()
        if run.sink is not None:
            run.sink.close()
    return run.result(segment)


@dataclass(slots=True, kw_only=True)
class _Segment:
    """A campaign's stretch on one target: what its checks, its shrinking and its replay need."""

    index: int
    seed: int
    target: Target
    names: tuple[str, ...]
    run_id: str
    planner: Planner
    follower: FeedFollower
    check: HistoryCheck
    first: int  # the history file's index of its first operation
    batches: list[Batch] = field(default_factory=list)
    decisions: list[tuple[int, ...]] = field(default_factory=list)
    feed: list[FeedEntry] = field(default_factory=list)  # kept only without a history file
    verdict: Verdict = Verdict.OK
    finding: Finding | None = None


@dataclass(slots=True, kw_only=True)
class _Run:
    """What a campaign keeps across its segments: counts, the history file, the verdicts."""

    seed: int
    started: float
    budget_s: float
    rng: random.Random
    recorder: Recorder
    history_file: Path | None
    sink: IO[str] | None
    progress: Callable[[str], None] | None
    on_batch: Callable[[float, int], None] | None
    segment_batches: int
    hooks: BatchHooks | None = None
    stopped: bool = False  # the hooks asked the run to stop
    batches: int = 0  # of the segments let go
    operations: int = 0  # of every segment, the open one too
    unknown: bool = False  # a segment let go had run out of checking budget
    last_report: float = 0.0

    def open(self, index: int, actors: int, factory: LedgerFactory, target: HttpTarget | None) -> _Segment:
        seed = segment_seed(self.seed, index)
        tgt, names, run_id = _open_target(seed, actors, factory, target)
        run_id = segment_run_id(index) if target is None else run_id
        try:
            setup(tgt, run_id)
            follower = FeedFollower(tgt)
        except BaseException:
            tgt.close()
            raise
        planner = Planner(target=tgt, run_id=run_id, rng=self.rng, workers=workers_for(names))
        check = HistoryCheck(history_file=self.history_file, first=self.operations)
        return _Segment(index=index, seed=seed, target=tgt, names=names, run_id=run_id, planner=planner,
                        follower=follower, check=check, first=self.operations)

    def batch(self, segment: _Segment) -> Finding | None:
        """Plan, run, record and check one batch; the finding, if it made one."""
        segment.planner.refresh()
        batch = segment.planner.next_batch()
        segment.batches.append(batch)
        seed = batch_seed(segment.seed, len(segment.batches) - 1)
        index = self.batches + len(segment.batches) - 1
        if self.hooks is not None:
            self.hooks.before(index)
        try:
            segment.decisions.append(tuple(execute_batch(segment.target, batch, self.recorder, seed)))
        finally:
            if self.hooks is not None:
                self.stopped = self.hooks.after(index)
        new = self.recorder.take()
        self.operations += len(new)
        if self.sink is not None:
            _append(self.sink, new)
        segment.check.add(new)
        entries = segment.follower.poll()
        segment.feed.extend(entries if self.recorder.keep else ())
        segment.check.feed(entries)
        segment.verdict, segment.finding = segment.check.run()
        self._report(segment)
        return segment.finding

    def _report(self, segment: _Segment) -> None:
        now = time.monotonic()
        if self.on_batch is not None:
            self.on_batch(now - self.started, self.operations)
        if self.progress is not None and now - max(self.last_report, self.started) > 2.0:
            self.last_report = now
            self.progress(f"  {now - self.started:5.1f} s: {self.batches + len(segment.batches)} batches, "
                          f"{self.operations} operations, {segment.verdict.value}")

    def close(self, segment: _Segment, *, budget_s: float) -> Finding | None:
        """The segment's last checks, with its feed read to the head; the finding, if any."""
        entries = segment.follower.poll()
        segment.feed.extend(entries if self.recorder.keep else ())
        segment.check.feed(entries, complete=True)
        segment.verdict, segment.finding = segment.check.run(budget_s=budget_s)
        return segment.finding

    def let_go(self, segment: _Segment) -> None:
        """A closed segment that found nothing: only its counts and its verdict stay."""
        self.unknown |= segment.verdict is Verdict.UNKNOWN
        self.batches += len(segment.batches)
        segment.target.close()

    def result(self, segment: _Segment | None) -> RunResult:
        assert segment is not None
        history = self.kept_history(segment)
        verdict = Verdict.UNKNOWN if segment.verdict is Verdict.OK and self.unknown else segment.verdict
        plan = Plan(actors=segment.names, workers=workers_for(segment.names), batches=tuple(segment.batches),
                    run_id=segment.run_id, project=segment.target.project)
        return RunResult(seed=segment.seed, plan=plan, history=history, decisions=tuple(segment.decisions),
                         verdict=verdict, finding=segment.finding, elapsed_s=time.monotonic() - self.started,
                         feed=tuple(segment.feed), recorded=None if history else self.operations,
                         segment=segment.index, earlier=(self.batches, segment.first))

    def kept_history(self, segment: _Segment) -> tuple[Operation, ...]:
        if self.recorder.keep:
            return tuple(self.recorder.history())
        if segment.finding is None or self.history_file is None:
            return ()
        # The shrinker and the exports start from the segment's whole history.
        return tuple(read_back(self.history_file, range(segment.first, self.operations)))


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
        sink = open_fresh(path)
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


def _read_segment(path: Path, first: int, indices: Sequence[int]) -> list[Operation]:
    return read_back(path, [first + i for i in indices])


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
