"""``aidememo-sim run --faults``: a fault campaign against a served or given server, how every fault
campaign ends (``run``, ``clients`` and ``xmemo run``), and the checks that refuse, before
anything starts, faults the command line cannot carry out.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from simulations.commands import EXIT_OK, EXIT_UNKNOWN, EXIT_VIOLATION
from simulations.errors import SimulationError
from simulations.linearizability.checker import Verdict

if TYPE_CHECKING:
    from simulations.faults.replay import FaultCase
    from simulations.faults.run import FaultRun
    from simulations.targets import HttpTarget

__all__ = ["exporter", "fault_ending", "fault_options", "fault_run", "served_count", "server_per_shard"]


def fault_run(args: argparse.Namespace, seed: int, target: HttpTarget | None, command: str) -> int:
    """The fault campaign ``args`` name against ``target``; ``command`` runs it again (printed, and in its reports)."""
    import time

    from simulations.faults.run import run_fault_campaign

    started = time.monotonic()
    if target is None:
        raise SimulationError("--faults needs a server: a target file (--config; kill and pause need its [serve] "
                              "command) or --url")
    if args.workers > 1 or args.scheduler is not None:
        print("--faults runs in one shard: the shards of a hunt would share the one served server, and a kill "
              "would hit them all (a [serve] command naming {port} and {dir} gives each shard its own)")
    print(f"aidememo-sim run: seed {seed}, {args.actors} actors, budget {args.budget:g} s, faults "
          f"{','.join(args.faults)}, against {args.url or args.config}")
    print(f"replay this run with: {command}")
    out = Path(args.out) / f"faults-seed-{seed}"
    history_file = out / "history.jsonl"
    print(f"history: {history_file} (check it with: aidememo-sim check {history_file})")
    run = run_fault_campaign(target=target, server=getattr(args, "served_server", None), kinds=args.faults, seed=seed,
                             actors=args.actors, budget_s=args.budget, max_batches=args.batches,
                             history_file=history_file, started=started, progress=print)
    print(f"{run.result.batches} batches in {run.result.elapsed_s:.1f} s")

    from simulations.faults.replay import FaultCase

    case = FaultCase(seed=seed, kinds=args.faults, servers=served_count(args), actors=args.actors, batches=0,
                     budget_s=args.budget, keep=None, rules=())
    return fault_ending(run, out, command, exporter(args, case, lambda: target))


def exporter(args: argparse.Namespace, case: FaultCase, target: Callable[[], object],
             client_class: object = None) -> Callable[[FaultRun, Path], None]:
    """How a fault campaign's findings are shrunk (reruns of ``case`` on ``target()``, with
    ``client_class`` for the clients') and written."""
    def export(run: FaultRun, out: Path) -> None:
        from simulations.faults.replay import export_finding, rerun

        server = getattr(args, "served_server", None)
        again = rerun(target=target, server=server, client_class=client_class)
        export_finding(run, case, again, out=out, config=args.config, say=print)

    return export


def served_count(args: argparse.Namespace) -> int:
    """The servers the target file's [serve] tables started (1 without any: the URL's)."""
    server = getattr(args, "served_server", None)
    return 1 if server is None else 1 + len(server.others)


def fault_ending(run: FaultRun, out: Path, command: str,
                 export: Callable[[FaultRun, Path], None] | None = None) -> int:
    """A fault campaign's recovery times, findings (``export`` shrinks and writes them, where its
    kind can), reports and summary line; its exit code."""
    from simulations.faults.report import write_reports

    recovery = run.recovery()
    if recovery is not None:
        print(recovery)
    for finding in run.findings:
        print(f"finding: {finding.rule} ({', '.join(finding.requirements) or 'no requirement id'})")
        print(finding.explanation)
        print(f"replay it, with its fault schedule: {command}")
    if run.findings and export is not None:
        export(run, out)
    paths, skipped = write_reports(run, out, command=command)
    for label, path in paths.items():
        print(f"{label}: {path}")
    if skipped is not None:
        print(skipped)
    print(run.summary())
    if run.findings:
        return EXIT_VIOLATION
    return EXIT_UNKNOWN if run.verdict is Verdict.UNKNOWN else EXIT_OK


def fault_options(args: argparse.Namespace) -> None:
    """Faults that need what the command line does not give are refused before anything starts.

    Raises:
        SimulationError: kill or pause without a target file with [serve], clock-jump without one
            claiming the test clock (or for clients and xmemo run), a kind XMemo has nothing for
            (one line).
    """
    from simulations.faults.schedule import SERVED_KINDS

    if args.command not in ("run", "clients", "xmemo") or not getattr(args, "faults", None):
        return
    if args.command == "xmemo":
        from simulations.faults.xmemo import refuse_faults

        refuse_faults(args.faults)
    if args.command == "clients" and "clock-jump" in args.faults:
        raise SimulationError("--faults clock-jump does not apply to clients yet: its races are not modelled under a "
                              "moved clock (run --faults clock-jump is)")
    served = [kind for kind in args.faults if kind in SERVED_KINDS]
    if served and (args.config is None or not _has_serve(args.config)):
        raise SimulationError(f"--faults {served[0]} needs the target file's [serve] command (the kit must start "
                              f"the server to {served[0]} it); give --config with a [serve] table")
    from simulations.faults.run import clock_refusal

    refusal = clock_refusal(args.faults, args.config)
    if refusal is not None:
        raise SimulationError(refusal)


def server_per_shard(args: argparse.Namespace) -> bool:
    """A fault hunt whose target file's [serve] command can run once per shard ({port}, {dir})."""
    from simulations.targets import serves_apart

    xmemo = args.command == "xmemo" and args.xmemo_command == "run"
    if (args.command not in ("run", "clients") and not xmemo) or not args.faults or args.config is None:
        return False
    return ((args.workers or 1) > 1 or args.scheduler is not None) and serves_apart(args.config)


def _has_serve(path: Path) -> bool:
    import tomllib

    try:
        with path.open("rb") as file:
            return isinstance(tomllib.load(file).get("serve"), (dict, list))  # [serve] or [[serve]] tables
    except (OSError, tomllib.TOMLDecodeError):
        return False  # the target file's own loader says what is wrong with it
