"""``aidememo-sim clients``: the kit's remote client raced while answers are lost, in this process
or as a hunt of shards, under faults too (``--faults``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulations.commands import EXIT_OK, EXIT_VIOLATION
from simulations.commands.faults import exporter, fault_ending, served_count, server_per_shard
from simulations.commands.output import hunt_ending
from simulations.commands.targets import factory_spec, seed_of, shard_projects, target_from_args, target_words
from simulations.errors import SimulationError

if TYPE_CHECKING:
    from simulations.targets import HttpTarget

__all__ = ["CLIENTS", "clients"]


def clients(args: argparse.Namespace) -> int:
    from aidememo_client.client import AideMemoClient
    from simulations.campaign import fresh_run_id
    from simulations.clients import run_client_campaign
    from simulations.targets import EmbeddedTarget, Target, load_factory

    _clients_options(args)
    seed = seed_of(args)
    client_class = load_factory(args.client, "client class") if args.client else AideMemoClient
    if server_per_shard(args):
        return _clients_hunt(args, seed, None)  # each shard starts, provisions and faults a server of its own
    http_target = target_from_args(args)
    if args.faults:
        return _clients_faults(args, seed, http_target, client_class)
    if args.workers > 1 or args.scheduler is not None:
        return _clients_hunt(args, seed, http_target)
    target: Target = http_target if http_target is not None else EmbeddedTarget(CLIENT_ACTORS, seed=seed)
    where = "the embedded reference" if http_target is None else args.url or str(args.config)
    print(f"aidememo-sim clients: seed {seed}, {args.rounds} handoffs x {args.clients} clients of "
          f"{target.actors[1]}, loss {args.loss:g}, against {where}")
    print(f"replay this run with: {_clients_command(args, seed)}")
    try:
        # A server keeps every receipt, so a run by URL needs ids of its own; the embedded one starts empty.
        run = run_client_campaign(target, seed=seed, run_id="r" if http_target is None else fresh_run_id(seed),
                                  rounds=args.rounds, workers=args.clients, loss=args.loss, budget_s=args.budget,
                                  client_class=client_class)
    finally:
        target.close()
    print(f"{len(run.history)} operations, {run.dropped} answers lost, {run.doubts} calls rerun after doubt, "
          f"in {run.elapsed_s:.1f} s")
    for problem in run.client_findings:
        print(f"client: {problem}")
    if run.finding is not None:
        print(run.finding.explanation)
    return EXIT_OK if run.clean else EXIT_VIOLATION


def _clients_faults(args: argparse.Namespace, seed: int, target: HttpTarget | None, client_class: Any) -> int:
    import time

    from simulations.faults.clients import run_client_faults
    from simulations.faults.replay import FaultCase

    started = time.monotonic()
    if target is None:
        raise SimulationError("--faults needs a server: a target file (--config; kill and pause need its [serve] "
                              "command) or --url")
    if args.workers > 1 or args.scheduler is not None:
        print("--faults runs in one shard: the shards would share the one served server, and a kill would hit them "
              "all (a [serve] command naming {port} and {dir} gives each shard its own)")
    print(f"aidememo-sim clients: seed {seed}, {args.rounds} handoffs x {args.clients} clients of {target.actors[1]}, "
          f"loss {args.loss:g}, faults {','.join(args.faults)}, against {args.url or args.config}")
    command = _clients_command(args, seed)
    print(f"replay this run with: {command}")
    run = run_client_faults(target=target, server=getattr(args, "served_server", None), kinds=args.faults, seed=seed,
                            rounds=args.rounds, workers=args.clients, loss=args.loss, client_class=client_class,
                            budget_s=args.budget, started=started)
    print(f"{run.result.batches} rounds in {run.result.elapsed_s:.1f} s")
    case = FaultCase(seed=seed, kinds=args.faults, servers=served_count(args), actors=len(target.actors),
                     batches=0, budget_s=args.budget, keep=None, rules=(), command="clients", clients=args.clients,
                     loss=args.loss, client=str(factory_spec(args.client)) if args.client else None)
    export = exporter(args, case, lambda: target, client_class)
    return fault_ending(run, Path(args.out) / f"clients-faults-seed-{seed}", command, export)


def _clients_options(args: argparse.Namespace) -> None:
    """``--clients`` and the hunt's ``--workers``. ``clients --workers K`` once meant K racing
    clients; so that no such command silently becomes a hunt of K shards, ``--workers`` there is
    refused unless ``--clients`` is given beside it (docs/simulations.md, the changelog).

    Raises:
        SimulationError: ``--workers`` without ``--clients``.
    """
    if args.workers is not None and args.clients is None:
        raise SimulationError(f"clients --workers now counts hunt shards, as in run; the racing clients per handoff "
                              f"are --clients K (give --clients {args.workers} for the old meaning, or --clients "
                              f"{CLIENTS} --workers {args.workers} for a hunt)")
    args.clients = CLIENTS if args.clients is None else args.clients
    args.workers = 1 if args.workers is None else args.workers


def _clients_command(args: argparse.Namespace, seed: int | str) -> str:
    return " ".join(["aidememo-sim", "clients", "--seed", str(seed), "--rounds", str(args.rounds), "--clients",
                     str(args.clients), "--loss", f"{args.loss:g}", "--budget", f"{args.budget:g}",
                     *(["--client", str(factory_spec(args.client))] if args.client else []), *target_words(args),
                     *(["--faults", ",".join(args.faults)] if args.faults else [])])


def _clients_hunt(args: argparse.Namespace, seed: int, first: HttpTarget | None) -> int:
    from simulations.hunt import Display, run_hunt
    from simulations.shards import ShardSpec

    if args.url is not None:
        raise SimulationError("--workers with --url would put every shard in one project; give a target file "
                              "with a provisioning command (--config), which gives each shard its own")
    where = f"the Dask scheduler at {args.scheduler}" if args.scheduler else f"a local cluster of {args.workers}"
    print(f"aidememo-sim clients: root seed {seed}, {args.workers} shards of {args.rounds} handoffs x {args.clients} "
          f"clients, loss {args.loss:g}, on {where}")
    command = " ".join([_clients_command(args, seed), "--workers", str(args.workers),
                        *(["--scheduler", args.scheduler] if args.scheduler else [])])
    print(f"replay this hunt with: {command}")
    if args.faults:
        print(f"faults {','.join(args.faults)}: each shard starts a server of its own from {args.config}'s [serve] "
              f"command; its reports in {Path(args.out).resolve()}/clients-faults-seed-SHARD_SEED/")
    specs = [ShardSpec(root_seed=seed, index=index, actors=len(CLIENT_ACTORS), budget_s=args.budget, max_batches=None,
                       factory=factory_spec(args.client), protocol="clients", rounds=args.rounds,
                       clients=args.clients, loss=args.loss, faults=tuple(args.faults or ()),
                       out=str(Path(args.out).resolve()) if args.faults else None,
                       config=str(args.config.resolve()) if args.faults else None,
                       alone=_clients_command(args, "{seed}") if args.faults else "")
             for index in range(args.workers)]
    if first is not None:
        specs = shard_projects(args, specs, first, len(CLIENT_ACTORS))
    hunt = run_hunt(specs, workers=args.workers, scheduler=args.scheduler, out=Path(args.out),
                    display=Display(sys.stdout))
    return hunt_ending(hunt, command, _clients_command(args, "{seed}"))


CLIENT_ACTORS = ("agent-a", "agent-b", "agent-c")  # simulations.shards races the same three


CLIENTS = 3  # racing clients per handoff, by default
