"""``aidememo-sim run``: an AideMemo campaign in this process (found, shrunk, exported), a hunt of
shards on Dask, or a fault campaign (``commands.faults``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from simulations.commands import EXIT_OK, EXIT_UNKNOWN
from simulations.commands.faults import fault_run, server_per_shard
from simulations.commands.output import exported, hunt_ending
from simulations.commands.targets import factory_spec, replay_words, seed_of, shard_projects, target_from_args, \
    target_words
from simulations.errors import SimulationError
from simulations.linearizability.checker import Verdict

if TYPE_CHECKING:
    from simulations.targets import HttpTarget

__all__ = ["run"]


def rerun_command(args: argparse.Namespace, seed: int) -> str:
    """The one command that runs this campaign again (tokens shown as variables, never values)."""
    parts = ["aidememo-sim", "run", "--seed", str(seed), "--actors", str(args.actors), "--budget", f"{args.budget:g}",
             *(["--batches", str(args.batches)] if args.batches else []), *target_words(args)]
    if args.ledger:
        parts += ["--ledger", args.ledger]
    if getattr(args, "faults", None):
        parts += ["--faults", ",".join(args.faults)]
    from simulations.plan import SEGMENT_BATCHES

    if getattr(args, "segment", SEGMENT_BATCHES) != SEGMENT_BATCHES:
        parts += ["--segment", str(args.segment)]
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    from simulations.campaign import run_campaign
    from simulations.replay import export_failure
    from simulations.shrink import shrink_where_found
    from simulations.targets import load_factory

    seed = seed_of(args)
    if server_per_shard(args):
        return hunt(args, seed, None)  # each shard starts, provisions and faults a server of its own
    target = target_from_args(args)
    if target is not None and args.ledger:
        raise SimulationError("--ledger applies to the embedded reference, not to --url or --config")
    factory = load_factory(args.ledger)
    if args.faults:
        return fault_run(args, seed, target, rerun_command(args, seed))
    if args.workers > 1 or args.scheduler is not None:
        if args.url is not None:
            raise SimulationError("--workers with --url would put every shard in one project; give a target file "
                                  "with a provisioning command (--config), which gives each shard its own")
        return hunt(args, seed, target)
    where = "the embedded reference" if target is None else args.url or str(args.config)
    print(f"aidememo-sim run: seed {seed}, {args.actors} actors, budget {args.budget:g} s, against {where}")
    print(f"replay this run with: {rerun_command(args, seed)}")
    history_file = Path(args.out) / f"run-seed-{seed}.jsonl"
    print(f"history: {history_file} (check it with: aidememo-sim check {history_file})")
    result = run_campaign(seed=seed, actors=args.actors, budget_s=args.budget, max_batches=args.batches,
                          target=target, factory=factory, progress=print, history_file=history_file,
                          segment_batches=args.segment)
    print(f"{result.batches} batches, {result.operations} operations, "
          f"verdict {result.verdict.value.upper()} in {result.elapsed_s:.1f} s")
    if result.finding is None:
        return EXIT_UNKNOWN if result.verdict is Verdict.UNKNOWN else EXIT_OK
    if result.segment:
        print(f"found in segment {result.segment} (from batch {result.earlier[0] + 1}, operation "
              f"#{result.earlier[1]} of the history file), on a fresh reference with segment seed {result.seed}; "
              f"the operation numbers below are the segment's")
    print(result.finding.explanation)
    result, rate = shrink_where_found(result, factory, target, progress=print)
    paths = export_failure(result, Path(args.out), target="embedded" if target is None else "url",
                           url=None if target is None else target.url, factory=factory_spec(args.ledger),
                           config=args.config, reproduction=rate)
    return exported(paths, replay_words(args, result.plan.project), rate)


def hunt(args: argparse.Namespace, seed: int, first: HttpTarget | None) -> int:
    from simulations.hunt import Display, run_hunt
    from simulations.shards import ShardSpec

    where = f"the Dask scheduler at {args.scheduler}" if args.scheduler else f"a local cluster of {args.workers}"
    print(f"aidememo-sim run: root seed {seed}, {args.workers} shards, {args.actors} actors, budget "
          f"{args.budget:g} s each, on {where}")
    command = rerun_command(args, seed) + f" --workers {args.workers}"
    if args.scheduler:
        command += f" --scheduler {args.scheduler}"
    print(f"replay this hunt with: {command}")
    alone = rerun_command(args, 0).replace(" --seed 0 ", " --seed {seed} ", 1)
    if args.faults:
        print(f"faults {','.join(args.faults)}: each shard starts a server of its own from {args.config}'s [serve] "
              f"command; its reports and history in {Path(args.out).resolve()}/faults-seed-SHARD_SEED/")
    else:
        print(f"histories: {Path(args.out).resolve()}/run-seed-SHARD_SEED.jsonl, one per shard")
    specs = [ShardSpec(root_seed=seed, index=index, actors=args.actors, budget_s=args.budget,
                       max_batches=args.batches, factory=factory_spec(args.ledger), out=str(Path(args.out).resolve()),
                       segment=args.segment, faults=tuple(args.faults or ()), alone=alone if args.faults else "",
                       config=str(args.config.resolve()) if args.faults else None)
             for index in range(args.workers)]
    if first is not None:
        specs = shard_projects(args, specs, first, args.actors)
    hunt = run_hunt(specs, workers=args.workers, scheduler=args.scheduler, out=Path(args.out),
                    display=Display(sys.stdout))
    return hunt_ending(hunt, command, alone)
