"""``aidememo-sim replay``: a replay file run again, AideMemo's on its recorded target (or the one
given), XMemo's on the embedded XMemo reference.
"""

from __future__ import annotations

import argparse

from simulations.commands import EXIT_OK, EXIT_VIOLATION
from simulations.commands.targets import factory_spec, target_from_args
from simulations.commands.xmemo import is_xmemo_replay, xmemo_replay
from simulations.errors import SimulationError

__all__ = ["replay"]


def replay(args: argparse.Namespace) -> int:
    from simulations.plan import Plan
    from simulations.faults.replay import is_fault_replay, replay_file
    from simulations.replay import load_replay, replay_target, reproduce

    if is_fault_replay(args.file):
        shown = replay_file(args.file, config=args.config, server=getattr(args, "served_server", None),
                            times=args.times, client=str(factory_spec(args.client)) if args.client else None,
                            say=print)
        return EXIT_VIOLATION if shown else EXIT_OK
    if args.client:
        raise SimulationError("--client applies to a clients fault finding's replay file; this is not one")
    if is_xmemo_replay(args.file):
        if args.url or args.config or args.token or args.project:
            raise SimulationError("an XMemo replay file runs on the embedded XMemo reference; drop --url, "
                                  "--config, --token and --project")
        return xmemo_replay(args)
    if args.ledger and (args.url or args.config):
        raise SimulationError("--ledger applies to the embedded reference, not to --url or --config")
    doc = load_replay(args.file, ledger=factory_spec(args.ledger), config=args.config, url_given=args.url is not None)
    http_target = None
    if doc["target"].get("kind") == "url":
        explicit = args.config is not None or args.url is not None
        actors = Plan.from_json(doc["plan"]).actors
        http_target = target_from_args(args, actors) if explicit else replay_target(doc)
        if http_target is None:
            raise SimulationError(f"{args.config} names the embedded reference; this failure was found over a URL")
        print(f"replaying over {http_target.url} in project {http_target.project}, with fresh ids each run")
    elif args.url or args.config or args.token or args.project:
        raise SimulationError("this failure was recorded on the embedded reference; drop --url, --config, --token "
                              "and --project")
    reproduced = 0
    last = None
    for n in range(1, args.times + 1):
        result = reproduce(doc, http_target)
        if result.finding is not None:
            reproduced += 1
            last = result
        print(f"run {n}: {'violation' if result.finding else 'no violation'} ({len(result.history)} operations)")
    print(f"reproduced {reproduced}/{args.times}")
    if last is not None and last.finding is not None:
        print(last.finding.explanation)
    return EXIT_VIOLATION if reproduced else EXIT_OK
