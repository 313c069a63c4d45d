"""``aidememo-sim xmemo run`` and ``xmemo replay``: XMemo races, found, shrunk and exported, or a
hunt of shards, under faults too (``--config``, ``--faults``); and the replay of their files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from simulations.commands import EXIT_OK, EXIT_VIOLATION
from simulations.commands.faults import exporter, fault_ending, served_count, server_per_shard
from simulations.commands.output import exported, hunt_ending
from simulations.commands.targets import factory_spec, parse_tokens, secret, secret_words, seed_of
from simulations.errors import SimulationError

if TYPE_CHECKING:
    from simulations.xmemo.targets import XMemoHttpTarget

__all__ = ["XMEMO_AGENTS", "is_xmemo_replay", "xmemo", "xmemo_replay"]


XMEMO_AGENTS = ("claude", "codex")  # simulations.xmemo.targets.AGENTS, named here so --help needs no import


def is_xmemo_replay(path: Path) -> bool:
    from refkit.jsonvalue import loads
    from simulations.xmemo.replay import FORMAT

    try:
        doc = loads(path.read_bytes())
    except (OSError, ValueError):
        return False  # the AideMemo loader says what is wrong with the file
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def _xmemo_keys(pairs: Sequence[str]) -> dict[str, str]:
    if len(pairs) == 1 and "=" not in pairs[0]:
        return dict.fromkeys(XMEMO_AGENTS, secret(pairs[0], "--key"))  # one key both agents share
    keys = parse_tokens(pairs, "--key")
    unknown = sorted(set(keys) - set(XMEMO_AGENTS))
    if unknown:
        raise SimulationError(f"--key names unknown agent {unknown[0]!r}; the agents are {', '.join(XMEMO_AGENTS)}")
    return keys


def _xmemo_run(args: argparse.Namespace) -> int:
    from simulations.plan import SEGMENT_BATCHES
    from simulations.targets import load_factory
    from simulations.xmemo.campaign import run_campaign
    from simulations.xmemo.replay import export_failure
    from simulations.xmemo.shrink import shrink
    from simulations.xmemo.targets import reference_factory

    seed = seed_of(args)
    if args.config is not None and (args.url or args.key or args.ledger):
        raise SimulationError("--config names the server and how to get its keys; drop --url, --key and --ledger")
    if args.url is not None and args.ledger:
        raise SimulationError("--ledger applies to the embedded XMemo reference, not to --url")
    if args.key and args.url is None:
        raise SimulationError("--key needs --url")
    factory = load_factory(args.ledger) if args.ledger else reference_factory
    words = ["aidememo-sim", "xmemo", "run", "--seed", str(seed), "--budget", f"{args.budget:g}"]
    if args.batches:
        words += ["--batches", str(args.batches)]
    if args.url is not None:
        shared = len(args.key) == 1 and "=" not in args.key[0]
        words += ["--url", args.url, *secret_words("--key", "XMEMO_KEY",
                                                    [""] if shared else [p.partition("=")[0] for p in args.key])]
    if args.ledger:
        words += ["--ledger", args.ledger]
    if args.segment != SEGMENT_BATCHES:
        words += ["--segment", str(args.segment)]
    words += ["--config", str(args.config)] if args.config is not None else []
    if server_per_shard(args):  # each shard starts, provisions and faults a server of its own
        return _xmemo_hunt(args, seed, [*words, "--faults", ",".join(args.faults)])
    target = _xmemo_target(args)
    if args.faults:
        return _xmemo_faults(args, seed, target, [*words, "--faults", ",".join(args.faults)])
    if args.workers > 1 or args.scheduler is not None:
        if target is not None:
            raise SimulationError("--workers and --scheduler run shards on the embedded XMemo reference; drop --url "
                                  "and --config (or, with --faults, name {port} and {dir} in the [serve] command)")
        return _xmemo_hunt(args, seed, words)
    where = "the embedded XMemo reference" if target is None else args.url or str(args.config)
    print(f"aidememo-sim xmemo run: seed {seed}, budget {args.budget:g} s, against {where}")
    print(f"replay this run with: {' '.join(words)}")
    run = run_campaign(seed=seed, budget_s=args.budget, max_batches=args.batches, factory=factory, target=target,
                       progress=print, segment_batches=args.segment)
    closing = "the last is the census" if run.segment == 0 else f"{run.segment + 1} segments, each closed by its census"
    print(f"{run.batches} batches ({closing}), {run.operations} operations, "
          f"{len(run.findings)} violations in {run.elapsed_s:.1f} s")
    if run.finding is None:
        return EXIT_OK
    if run.segment:
        print(f"found in segment {run.segment} (from batch {run.earlier[0] + 1}), on a fresh reference with "
              f"segment seed {run.seed}; the operations below are the segment's")
    print(f"{run.finding.requirement}: {run.finding.explanation}")
    if target is not None:
        # Over a URL the interleaving was the network's: the replay file re-runs the plan on the embedded reference.
        print("(found over a URL: the replay file re-runs this plan against the embedded XMemo reference)")
    else:
        print("shrinking ...")
        run = shrink(run, factory)
        print(f"shrunk to {run.plan.operations} operations in {len(run.plan.batches)} batches:")
        if run.finding is not None:
            print(f"{run.finding.requirement}: {run.finding.explanation}")
    from simulations.targets import named_words

    paths = export_failure(run, Path(args.out), factory=factory_spec(args.ledger))
    return exported(paths, named_words(factory_spec(args.ledger), None))


def _xmemo_target(args: argparse.Namespace) -> XMemoHttpTarget | None:
    from simulations.xmemo.targets import XMemoHttpTarget

    if args.config is not None:
        from simulations.faults.xmemo import xmemo_target

        url, keys, timeout_s = xmemo_target(args.config)
        return XMemoHttpTarget(url, keys, timeout_s=timeout_s)
    return None if args.url is None else XMemoHttpTarget(args.url, _xmemo_keys(args.key))


def _xmemo_faults(args: argparse.Namespace, seed: int, target: XMemoHttpTarget | None, words: list[str]) -> int:
    import time

    from simulations.faults.replay import FaultCase
    from simulations.faults.xmemo import run_xmemo_faults, xmemo_target

    started = time.monotonic()
    if target is None:
        raise SimulationError("--faults needs an XMemo server: a target file (--config; kill and pause need its "
                              "[serve] command) or --url with --key")
    if args.workers > 1 or args.scheduler is not None:
        print("--faults runs in one shard: the shards would share the one server, and a kill would hit them all "
              "(a [serve] command naming {port} and {dir} gives each shard its own)")
    command = " ".join(words)
    print(f"aidememo-sim xmemo run: seed {seed}, budget {args.budget:g} s, faults {','.join(args.faults)}, against "
          f"{args.config or args.url}")
    print(f"replay this run with: {command}")
    run = run_xmemo_faults(url=target.url, keys=target.keys, timeout_s=target.timeout_s,
                           server=getattr(args, "served_server", None), kinds=args.faults, seed=seed,
                           budget_s=args.budget, max_batches=args.batches, started=started, progress=print)
    print(f"{run.result.batches} batches and the census in {run.result.elapsed_s:.1f} s")
    case = FaultCase(seed=seed, kinds=args.faults, servers=served_count(args), actors=len(target.keys), batches=0,
                     budget_s=args.budget, keep=None, rules=(), command="xmemo")
    config = args.config
    # Each rerun bootstraps a fresh owner's keys from the target file (no two runs share captures'
    # keys); a run by --url reuses its keys, its runs' ids being their own.
    fresh = (lambda: (target.url, target.keys, target.timeout_s)) if config is None else (lambda: xmemo_target(config))
    return fault_ending(run, Path(args.out) / f"xmemo-faults-seed-{seed}", command, exporter(args, case, fresh))


def _xmemo_hunt(args: argparse.Namespace, seed: int, words: list[str]) -> int:
    from simulations.hunt import Display, run_hunt
    from simulations.shards import ShardSpec

    where = f"the Dask scheduler at {args.scheduler}" if args.scheduler else f"a local cluster of {args.workers}"
    print(f"aidememo-sim xmemo run: root seed {seed}, {args.workers} shards, budget {args.budget:g} s each, on {where}")
    command = " ".join([*words, "--workers", str(args.workers), *(["--scheduler", args.scheduler] if args.scheduler else [])])
    print(f"replay this hunt with: {command}")
    alone = " ".join(words).replace(f" --seed {seed} ", " --seed {seed} ", 1)
    if args.faults:
        print(f"faults {','.join(args.faults)}: each shard starts a server of its own from {args.config}'s [serve] "
              f"command; its reports in {Path(args.out).resolve()}/xmemo-faults-seed-SHARD_SEED/")
    specs = [ShardSpec(root_seed=seed, index=index, actors=len(XMEMO_AGENTS), budget_s=args.budget,
                       max_batches=args.batches, factory=factory_spec(args.ledger), protocol="xmemo",
                       segment=args.segment, faults=tuple(args.faults or ()),
                       out=str(Path(args.out).resolve()) if args.faults else None,
                       config=str(args.config.resolve()) if args.faults else None, alone=alone if args.faults else "")
             for index in range(args.workers)]
    hunt = run_hunt(specs, workers=args.workers, scheduler=args.scheduler, out=Path(args.out),
                    display=Display(sys.stdout))
    return hunt_ending(hunt, command, alone)


def xmemo_replay(args: argparse.Namespace) -> int:
    from simulations.xmemo.replay import reproduce

    reproduced = reproduce(args.file, times=args.times, factory=factory_spec(args.ledger))
    print(f"reproduced {reproduced}/{args.times}")
    return EXIT_VIOLATION if reproduced else EXIT_OK


def xmemo(args: argparse.Namespace) -> int:
    return _xmemo_run(args) if args.xmemo_command == "run" else xmemo_replay(args)
