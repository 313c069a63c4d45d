"""Campaigns: plan, run and check batches until a violation or the budget; shrink what fails.

A run is fully described by (target, seed, plan). On the embedded reference the plan and the
seed replay the same interleaving; ``rerun`` executes a recorded plan without planning again,
and ``shrink`` removes batches and operations while the violation still reproduces.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulations.checker import Verdict, check
from simulations.concurrency import (
    READER,
    Batch,
    EmbeddedTarget,
    HttpTarget,
    LedgerFactory,
    Plan,
    Planner,
    Target,
    execute_batch,
    receipt_violations,
    reference_factory,
    setup,
)
from simulations.errors import SimulationError
from simulations.history import Operation, Recorder
from simulations.model import LEDGER

__all__ = ["Finding", "RunResult", "batch_seed", "check_history", "rerun", "run_campaign", "shrink"]

RUN_ID = "r"  # embedded runs start from an empty ledger, so ids need no uniqueness across runs


def _fresh_run_id(seed: int) -> str:
    # Not from the seed on purpose: a server keeps every receipt, so a rerun needs new ids.
    return f"s{seed}x{random.SystemRandom().randrange(16**8):08x}"


def batch_seed(seed: int, index: int) -> int:
    """The scheduler's seed for batch ``index``: independent streams from one printed seed."""
    return (seed * 1_000_003 + index) & 0xFFFF_FFFF_FFFF


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A violation: which operations, and why."""

    kind: str  # "linearizability" | "receipts"
    witness: tuple[int, ...]
    explanation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    seed: int
    plan: Plan
    history: tuple[Operation, ...]
    decisions: tuple[tuple[int, ...], ...]
    verdict: Verdict
    finding: Finding | None
    elapsed_s: float


def check_history(
    history: Sequence[Operation], budget_s: float = 10.0, explain: bool = True
) -> tuple[Verdict, Finding | None]:
    """The ledger model over the history, then the cross-partition receipt checks.

    ``explain=False`` gives the verdict only (the witness is then the whole partition): what
    shrinking needs, many times over.
    """
    for witness, why in receipt_violations(history):
        text = why + ":\n" + "\n".join(
            f"  #{i} (client {history[i].client}): {LEDGER.describe_operation(history[i].input, history[i].output)}"
            for i in witness
        )
        return Verdict.ILLEGAL, Finding(kind="receipts", witness=tuple(sorted(witness)), explanation=text)
    result = check(LEDGER, history, budget_s=budget_s, explain_budget_s=min(5.0, budget_s) if explain else 0)
    violation = result.violation
    if violation is None:
        return result.verdict, None
    text = violation.explanation
    if explain and not violation.minimal:
        text += "\n(the shrinking budget ran out: the set above may list more operations than necessary)"
    return result.verdict, Finding(kind="linearizability", witness=violation.witness, explanation=text)


def _actors(count: int) -> tuple[str, ...]:
    if count < 2:
        raise SimulationError("at least two actors are needed for a race")
    return tuple(f"agent-{chr(ord('a') + i)}" for i in range(count))


def _workers(actors: Sequence[str]) -> tuple[str, ...]:
    # Two workers per actor: one identity, two processes racing (a retry, a second lane).
    return tuple(a for a in actors for _ in range(2)) + (READER,)


def run_campaign(
    *,
    seed: int,
    actors: int = 3,
    budget_s: float = 20.0,
    max_batches: int | None = None,
    factory: LedgerFactory = reference_factory,
    target: HttpTarget | None = None,
    progress: Callable[[str], None] | None = None,
    check_every: int = 4,
) -> RunResult:
    """Plan and run batches until a violation, ``max_batches`` or ``budget_s``."""
    started = time.monotonic()
    rng = random.Random(seed)
    if target is None:
        names = _actors(actors)
        tgt: Target = EmbeddedTarget(names, seed=seed, factory=factory)
        run_id = RUN_ID
    else:
        tgt = target
        names = target.actors
        run_id = _fresh_run_id(seed)  # fresh ids on a long-lived server
    workers = _workers(names)
    recorder = Recorder()
    batches: list[Batch] = []
    decisions: list[tuple[int, ...]] = []
    verdict, finding = Verdict.OK, None
    last_report = started
    try:
        setup(tgt, run_id)
        planner = Planner(target=tgt, run_id=run_id, rng=rng, workers=workers)
        index = 0
        while True:
            if max_batches is not None and index >= max_batches:
                break
            if time.monotonic() - started > budget_s * 0.8:
                break
            planner.refresh()
            batch = planner.next_batch()
            batches.append(batch)
            decisions.append(tuple(execute_batch(tgt, workers, batch, recorder, batch_seed(seed, index))))
            index += 1
            if index % check_every == 0:
                verdict, finding = check_history(recorder.history())
                if progress is not None and time.monotonic() - last_report > 2.0:
                    last_report = time.monotonic()
                    progress(f"  {time.monotonic() - started:5.1f} s: {index} batches, "
                             f"{len(recorder.history())} operations, {verdict.value}")
                if finding is not None:
                    break
        if finding is None:
            verdict, finding = check_history(recorder.history())
    finally:
        tgt.close()
    return RunResult(
        seed=seed, plan=Plan(actors=names, workers=workers, batches=tuple(batches), run_id=run_id),
        history=tuple(recorder.history()), decisions=tuple(decisions), verdict=verdict, finding=finding,
        elapsed_s=time.monotonic() - started,
    )


def rerun(
    plan: Plan,
    seed: int,
    factory: LedgerFactory = reference_factory,
    schedule: Sequence[Sequence[int]] = (),
    explain: bool = True,
) -> RunResult:
    """Execute a recorded plan on a fresh embedded ledger, batch seeds as in the original run.

    ``schedule`` (per batch, the workers chosen at each point) is followed where it applies.
    """
    started = time.monotonic()
    tgt = EmbeddedTarget(plan.actors, seed=seed, factory=factory)
    recorder = Recorder()
    decisions = []
    try:
        setup(tgt, RUN_ID)
        for index, batch in enumerate(plan.batches):
            script = schedule[index] if index < len(schedule) else ()
            decisions.append(tuple(execute_batch(tgt, plan.workers, batch, recorder, batch_seed(seed, index), script)))
    finally:
        tgt.close()
    history = recorder.history()
    verdict, finding = check_history(history, explain=explain)
    return RunResult(seed=seed, plan=plan, history=tuple(history), decisions=tuple(decisions),
                     verdict=verdict, finding=finding, elapsed_s=time.monotonic() - started)


def rerun_over_http(plan: Plan, seed: int, target: HttpTarget) -> RunResult:
    """Execute a recorded plan against a URL with fresh ids (the server keeps old receipts)."""
    from simulations.replay import with_run_placeholder

    started = time.monotonic()
    run_id = _fresh_run_id(seed)
    text = plan_json(plan)
    text = with_run_placeholder(text) if plan.run_id == RUN_ID else text.replace(plan.run_id, "@RUN@")
    fresh = Plan.from_json(json.loads(text.replace("@RUN@", run_id)))
    recorder = Recorder()
    try:
        setup(target, run_id)
        for index, batch in enumerate(fresh.batches):
            execute_batch(target, fresh.workers, batch, recorder, batch_seed(seed, index))
    finally:
        target.close()
    history = recorder.history()
    verdict, finding = check_history(history)
    return RunResult(seed=seed, plan=fresh, history=tuple(history), decisions=(), verdict=verdict,
                     finding=finding, elapsed_s=time.monotonic() - started)


def shrink(
    result: RunResult, factory: LedgerFactory = reference_factory, budget_s: float = 60.0
) -> RunResult:
    """Fewest batches, then operations, then actors, that still fail under the same seed."""
    deadline = time.monotonic() + budget_s
    best = result

    def attempt(batches: Sequence[Batch], schedule: Sequence[Sequence[int]]) -> RunResult | None:
        kept = [(b, d) for b, d in zip(batches, schedule) if b.ops]
        plan = Plan(actors=best.plan.actors, workers=best.plan.workers, batches=tuple(b for b, _ in kept),
                    run_id=best.plan.run_id)
        if time.monotonic() > deadline or plan.operations == 0:
            return None
        trial = rerun(plan, result.seed, factory, [d for _, d in kept], explain=False)
        return trial if trial.finding is not None else None

    # Chunks of batches first (halves, quarters, ...), as delta debugging does, then single
    # operations; each candidate must still fail under the same seed, following the schedule
    # recorded so far wherever it still applies.
    batches, schedule = list(best.plan.batches), list(best.decisions)
    # First keep only the handoffs the witness is about: usually most of the plan goes at once.
    if best.finding is not None:
        blamed = {str(best.history[i].input.get("handoff_id")) for i in best.finding.witness}
        focused = [Batch(clock_ms=b.clock_ms, ops=tuple(op for op in b.ops if str(op.input.get("handoff_id")) in blamed))
                   for b in batches]
        got = attempt(focused, schedule)
        if got is not None:
            best, batches, schedule = got, list(got.plan.batches), list(got.decisions)
    chunk = max(1, len(batches) // 2)
    while chunk >= 1:
        start = 0
        while start < len(batches):
            got = attempt(batches[:start] + batches[start + chunk:], schedule[:start] + schedule[start + chunk:])
            if got is not None:
                best, batches, schedule = got, list(got.plan.batches), list(got.decisions)
            else:
                start += chunk
        chunk //= 2
    b = 0
    while b < len(batches):
        i = 0
        while i < len(batches[b].ops):
            cut = list(batches)
            cut[b] = Batch(clock_ms=batches[b].clock_ms, ops=batches[b].ops[:i] + batches[b].ops[i + 1:])
            got = attempt(cut, schedule)
            if got is not None:
                emptied = len(got.plan.batches) < len(batches)
                best, batches, schedule = got, list(got.plan.batches), list(got.decisions)
                if emptied:
                    break
            else:
                i += 1
        else:
            b += 1
    # Fewest actors: those the remaining operations name (sender, receiver, fact author).
    named = {str(op.input.get("actor")) for batch in best.plan.batches for op in batch.ops}
    for batch in best.plan.batches:
        for op in batch.ops:
            payload = op.input.get("payload") or {}
            named.add(str(payload.get("to_actor")))
            fact = op.input.get("fact") or {}
            named.add(str(fact.get("actor_id")))
    actors = tuple(a for a in best.plan.actors if a in named)
    if 2 <= len(actors) < len(best.plan.actors) and time.monotonic() < deadline:
        fewer = Plan(actors=actors, workers=best.plan.workers, batches=best.plan.batches, run_id=best.plan.run_id)
        trial = rerun(fewer, result.seed, factory, best.decisions, explain=False)
        if trial.finding is not None:
            best = trial
    if best is result:
        return result
    # The same run once more, explained: the shrinking runs only needed a verdict.
    final = rerun(best.plan, result.seed, factory, best.decisions)
    return final if final.finding is not None else best


# -- the command line -----------------------------------------------------------------------


def _parse_tokens(pairs: Sequence[str]) -> dict[str, str]:
    tokens = {}
    for pair in pairs:
        actor, sep, token = pair.partition("=")
        if not sep or not actor or not token:
            raise SimulationError(f"--token takes ACTOR=TOKEN, not {pair!r}")
        tokens[actor] = token
    return tokens


def _target_from_args(args: Any) -> HttpTarget | None:
    if args.config is not None:
        from simulations.targets import target_from_config

        return target_from_config(args.config, getattr(args, "actors", 3))
    if args.url is None:
        if args.token or args.project:
            raise SimulationError("--token and --project need --url")
        return None
    if not args.project:
        raise SimulationError("--url needs --project")
    return HttpTarget(args.url, args.project, _parse_tokens(args.token))


def run_command(args: Any) -> int:
    from simulations.replay import export_failure

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    target = _target_from_args(args)
    if target is not None and args.ledger:
        raise SimulationError("--ledger applies to the embedded reference, not to --url or --config")
    factory = load_factory(args.ledger)
    where = "the embedded reference" if target is None else args.url or str(args.config)
    print(f"aidememo-sim run: seed {seed}, {args.actors} actors, budget {args.budget:g} s, against {where}")
    replay_cmd = rerun_command(args, seed)
    print(f"replay this run with: {replay_cmd}")
    result = run_campaign(seed=seed, actors=args.actors, budget_s=args.budget, target=target,
                          factory=factory, progress=print)
    print(f"{len(result.plan.batches)} batches, {len(result.history)} operations, "
          f"verdict {result.verdict.value.upper()} in {result.elapsed_s:.1f} s")
    if result.finding is None:
        return 3 if result.verdict is Verdict.UNKNOWN else 0
    print(result.finding.explanation)
    if target is None:
        print("shrinking ...")
        result = shrink(result, factory)
        print(f"shrunk to {result.plan.operations} operations in {len(result.plan.batches)} batches, "
              f"{len(result.plan.actors)} actors:")
        if result.finding is not None:
            print(result.finding.explanation)
    paths = export_failure(result, Path(args.out), target="embedded" if target is None else "url",
                           url=args.url, factory=str(Path(args.ledger.rpartition(":")[0]).resolve()) + ":"
                           + args.ledger.rpartition(":")[2] if args.ledger else None)
    for label, path in paths.items():
        print(f"{label}: {path}")
    print(f"reproduce with: aidememo-sim replay {paths['replay file']}")
    return 1


def rerun_command(args: Any, seed: int) -> str:
    """The one command that runs this campaign again (tokens shown as variables, never values)."""
    parts = ["aidememo-sim", "run", "--seed", str(seed), "--actors", str(args.actors), "--budget", f"{args.budget:g}"]
    if args.config is not None:
        parts += ["--config", str(args.config)]
    if args.url is not None:
        parts += ["--url", args.url, "--project", str(args.project)]
        for pair in args.token:
            actor = pair.partition("=")[0]
            parts += ["--token", f"{actor}=$TOKEN_{actor.replace('-', '_').upper()}"]
    if args.ledger:
        parts += ["--ledger", args.ledger]
    return " ".join(parts)


def load_factory(spec: str | None) -> LedgerFactory:
    """``None`` for the reference, else ``path/to/file.py:name`` (how planted variants travel)."""
    if spec is None:
        return reference_factory
    import importlib.util

    path, sep, name = spec.rpartition(":")
    if not sep or not path:
        raise SimulationError(f"ledger factory must be FILE.py:NAME, not {spec!r}")
    module_spec = importlib.util.spec_from_file_location(f"_sim_factory_{abs(hash(path))}", path)
    if module_spec is None or module_spec.loader is None or not Path(path).is_file():
        raise SimulationError(f"cannot load ledger factory file {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    factory = getattr(module, name, None)
    if factory is None:
        raise SimulationError(f"{path} has no ledger factory named {name}")
    return factory  # type: ignore[no-any-return]


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.to_json(), sort_keys=True)
