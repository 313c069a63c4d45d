"""aidememo-sim finds the races that break the AideMemo handoff protocol.

It runs concurrent agents against a ledger (the embedded reference, or a server by URL or
target file), checks what they saw against a model of the protocol, and turns each failure into
a small case that replays. It also replays such a case, checks a recorded history for
linearizability, races the kit's remote client, and races XMemo captures and recalls.

Exit codes: 0 when no violation was found; 1 when one was (or, for ``replay``, when it
reproduced); 2 for bad input; 3 when the verdict is UNKNOWN (budget ran out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from refkit.args import reader_gone
from refkit.extras import MissingExtra, require
from refkit.version import VERSION
from simulations.commands import EXIT_USAGE
from simulations.commands.check import MODELS, check_file
from simulations.commands.clients import CLIENTS, clients
from simulations.commands.faults import fault_options, server_per_shard
from simulations.commands.replay import replay
from simulations.commands.run import run
from simulations.commands.xmemo import XMEMO_AGENTS, is_xmemo_replay, xmemo
from simulations.errors import SimulationError
from simulations.linearizability.checker import DEFAULT_MAX_CONFIGS

__all__ = ["main"]

# ``--help``'s text: the module docstring's paragraphs before the exit codes, which the epilog gives.
DESCRIPTION = " ".join(__doc__.split("\n\nExit codes:")[0].split())


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input on one line and exits 2, with no usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SimulationError(message)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _workers(text: str) -> int:
    if text == "auto":
        return os.cpu_count() or 1
    return _positive_int(text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1: {text!r}")
    return value


def _fault_kinds(text: str) -> tuple[str, ...]:
    from simulations.faults.schedule import parse_faults

    try:
        return parse_faults(text)
    except SimulationError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--faults: ")) from None


def _seed(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an integer seed: {text!r}") from exc
    if value < 0:
        raise argparse.ArgumentTypeError(f"seeds are non-negative: {text!r}")
    return value


def _json_value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"not a JSON value: {text!r} (a string needs quotes: --init '\"{text}\"')") from None


def _target_arguments(parser: argparse.ArgumentParser, token_note: str) -> None:
    """Where a campaign runs (``run``, ``clients``), and its seed."""
    parser.add_argument("--url", help="base URL of a server (default: the embedded reference)")
    parser.add_argument("--config", type=Path, help="target file (the conformance suite's format)")
    parser.add_argument("--token", action="append", default=[], metavar="ACTOR=@FILE",
                        help=f"bearer token of an actor on --url ({token_note}): ACTOR=@FILE reads it from a 0600 "
                             "file, ACTOR alone from TOKEN_<ACTOR>; ACTOR=TOKEN works but shows in ps")
    parser.add_argument("--project", help="project id on --url")
    parser.add_argument("--seed", type=_seed, help="seed of every random choice (default: random, printed)")


def _add_run(sub: Any) -> None:
    from simulations.plan import SEGMENT_BATCHES

    run = sub.add_parser("run", help="generate races, run them, check them against the model")
    _target_arguments(run, "repeat; at least two actors")
    run.add_argument("--budget", type=_positive_float, default=20.0, metavar="SECONDS",
                     help="time to spend generating and checking (default 20)")
    run.add_argument("--batches", type=_positive_int, metavar="N",
                     help="stop after N batches even if budget is left (with --seed, an embedded run then "
                          "repeats batch for batch on any machine)")
    run.add_argument("--actors", type=_positive_int, default=3, metavar="K",
                     help="concurrent actors (default 3)")
    run.add_argument("--ledger", metavar="FILE.py:NAME",
                     help="embedded only: a ledger factory to use instead of the reference "
                          "(how the kit's planted race bugs are run)")
    run.add_argument("--out", type=Path, default=Path("sim-failures"),
                     help="where a failure's replay file, timeline, pytest and curl files go")
    run.add_argument("--segment", type=_count, default=SEGMENT_BATCHES, metavar="N",
                     help=f"embedded only: move to a fresh reference, checked on its own, every N batches, so "
                          f"memory stays flat however long the run (default {SEGMENT_BATCHES}; 0: never)")
    run.add_argument("--faults", type=_fault_kinds, metavar="KIND,...",
                     help="a fault campaign: inject these faults from the seed's schedule (kill, pause: the target "
                          "file's [serve] server; drop-answers, reset: the campaign's own proxy in front of it; "
                          "clock-jump: the test clock, where the target file claims it)")
    _hunt_arguments(run)


def _hunt_arguments(parser: argparse.ArgumentParser, default: int | None = 1) -> None:
    parser.add_argument("--workers", type=_workers, default=default, metavar="N|auto",
                        help="campaign shards run in parallel on a Dask cluster, each with a seed derived from "
                             "--seed (default 1: this process alone; auto: one per core)")
    parser.add_argument("--scheduler", metavar="tcp://HOST:8786",
                        help="submit the shards to this running Dask scheduler instead of a local cluster")


def _add_replay(sub: Any) -> None:
    replay = sub.add_parser("replay", help="re-run a replay file; exit 1 if the violation reproduces")
    replay.add_argument("file", type=Path)
    replay.add_argument("--times", type=_positive_int, default=1, help="repetitions (default 1)")
    replay.add_argument("--url", help="base URL (failures found over a URL; default: the recorded target)")
    replay.add_argument("--config", type=Path,
                        help="target file to provision a fresh project from (failures found over a URL; "
                             "default: the file the run used)")
    replay.add_argument("--token", action="append", default=[], metavar="ACTOR=@FILE",
                        help="bearer token of an actor on --url (repeat): ACTOR=@FILE, or ACTOR alone for "
                             "TOKEN_<ACTOR>")
    replay.add_argument("--project", help="project id on --url")
    replay.add_argument("--client", metavar="FILE.py:NAME",
                        help="a clients fault finding: the client class it was found with (its replay file names "
                             "it, and never loads it)")
    replay.add_argument("--ledger", metavar="FILE.py:NAME",
                        help="embedded only: the ledger factory to replay against (a replay file records the one "
                             "its run used, but never imports it: name it here)")


def _add_xmemo(sub: Any) -> None:
    from simulations.plan import SEGMENT_BATCHES

    xmemo = sub.add_parser("xmemo", help="race XMemo captures and recalls (one memory per key, recall bounds)")
    xsub = xmemo.add_subparsers(dest="xmemo_command", required=True, parser_class=_Parser)
    xrun = xsub.add_parser("run", help="generate XMemo races, run them, check the history")
    xrun.add_argument("--url", help="base URL of an XMemo server (default: the embedded XMemo reference)")
    xrun.add_argument("--key", action="append", default=[], metavar="[AGENT=]KEY|@FILE",
                      help=f"API key on --url: AGENT=KEY for each of {', '.join(XMEMO_AGENTS)}, "
                           "or one KEY both agents share; KEY as @FILE reads a 0600 file (a key in the "
                           "arguments shows in ps)")
    xrun.add_argument("--seed", type=_seed, help="seed of every random choice (default: random, printed)")
    xrun.add_argument("--budget", type=_positive_float, default=10.0, metavar="SECONDS",
                      help="time to spend running batches (default 10)")
    xrun.add_argument("--batches", type=_positive_int, metavar="N",
                      help="stop after N batches (before the census) even if budget is left")
    xrun.add_argument("--ledger", metavar="FILE.py:NAME",
                      help="embedded only: an XMemo reference factory to use instead of the reference "
                           "(how the kit's planted races are run)")
    xrun.add_argument("--out", type=Path, default=Path("sim-failures"),
                      help="where a failure's replay file, timeline and pytest file go")
    xrun.add_argument("--segment", type=_count, default=SEGMENT_BATCHES, metavar="N",
                      help=f"embedded only: move to a fresh reference, closed by its census and checked on its "
                           f"own, every N batches, so memory stays flat (default {SEGMENT_BATCHES}; 0: never)")
    xrun.add_argument("--config", type=Path, metavar="TARGET.toml",
                      help="an XMemo target file (profile = \"xmemo\"): its url or [serve] command, and the "
                           "[provision] command that bootstraps a fresh owner's keys")
    xrun.add_argument("--faults", type=_fault_kinds, metavar="KIND,...",
                      help="inject these faults from the seed's schedule (a server: --config or --url; kill, pause: "
                           "the target file's [serve] command); as for run")
    _hunt_arguments(xrun)
    xreplay = xsub.add_parser("replay", help="re-run an XMemo replay file; exit 1 if the violation reproduces")
    xreplay.add_argument("file", type=Path)
    xreplay.add_argument("--times", type=_positive_int, default=1, help="repetitions (default 1)")
    xreplay.add_argument("--ledger", metavar="FILE.py:NAME",
                         help="the XMemo reference factory to replay against (a replay file records the one its "
                              "run used, but never imports it: name it here)")


def _build_parser() -> argparse.ArgumentParser:
    from simulations.linearizability.porcupine import FORMATS

    parser = _Parser(prog="aidememo-sim", description=DESCRIPTION,
                     epilog="exit codes: 0 no violation; 1 violation (replay: it reproduced); 2 bad input; "
                            "3 verdict UNKNOWN (budget ran out). See docs/simulations.md.")
    parser.add_argument("--version", action="version", version=f"aidememo-sim {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    _add_run(sub)
    _add_replay(sub)

    chk = sub.add_parser("check", help="check a history for linearizability")
    chk.add_argument("file", type=Path)
    chk.add_argument("--model", choices=tuple(MODELS),
                     help="the model to check against (default: the one the history file names)")
    chk.add_argument("--init", type=_json_value, metavar="JSON", default=argparse.SUPPRESS,
                     help="the model's initial state as a JSON value, e.g. 0 (default: the history "
                          "file's, else the model's own: null for cas-register, \"\" for kv)")
    chk.add_argument("--format", choices=FORMATS, default="auto",
                     help="jsonl (this kit's), porcupine (Operation or Event records as JSON), jepsen-log "
                          "or edn (Jepsen histories, as in Porcupine's test data); default: auto")
    chk.add_argument("--budget", type=_positive_float, default=60.0, metavar="SECONDS",
                     help="search budget; when it runs out the verdict is UNKNOWN (default 60)")
    chk.add_argument("--max-configurations", type=_positive_int, default=DEFAULT_MAX_CONFIGS, metavar="N",
                     help="memory budget: configurations the search may hold at once before the verdict "
                          f"is UNKNOWN (default {DEFAULT_MAX_CONFIGS:,}, about 250 MB)")
    chk.add_argument("--html", type=Path, help="write a timeline of the history here")
    clients = sub.add_parser("clients", help="race the kit's remote client (accept and return with its one "
                                             "identical retry and recovered: true reruns) while answers are lost")
    _target_arguments(clients, "repeat; the first two writers send and receive")
    clients.add_argument("--rounds", type=_positive_int, default=4, metavar="N",
                         help="handoffs, each taken by --clients racing clients of the receiver (default 4)")
    clients.add_argument("--clients", type=_positive_int, metavar="K",
                         help=f"racing clients per handoff (default {CLIENTS}; before the hunts this was --workers)")
    clients.add_argument("--loss", type=_fraction, default=0.3, metavar="P",
                         help="share of the POST answers lost after the server applied them (default 0.3)")
    clients.add_argument("--client", metavar="FILE.py:NAME",
                         help="the client class to race (default: the kit's aidememo_client.AideMemoClient); "
                              "a class built and used as that one is, e.g. a subclass with its recovery changed")
    clients.add_argument("--budget", type=_positive_float, default=20.0, metavar="SECONDS",
                         help="time for checking the history against the model (default 20)")
    clients.add_argument("--out", type=Path, default=Path("sim-failures"),
                         help="where a hunt writes the history of each distinct finding")
    clients.add_argument("--faults", type=_fault_kinds, metavar="KIND,...",
                         help="inject these faults from the seed's schedule, a round per batch (needs --config; "
                              "kill, pause: its [serve] command); as for run")
    _hunt_arguments(clients, default=None)

    _add_xmemo(sub)
    return parser


def _served(command: Any, args: argparse.Namespace) -> int:
    """``run``, ``clients``, ``xmemo run`` and ``replay`` against a target file whose ``[serve]``
    server the kit starts for them (its log in ``--out``, or beside the replay file); a fault hunt
    with a server per shard starts none here (each shard starts its own)."""
    fault_options(args)
    config = _served_config(args)
    if config is None or server_per_shard(args):
        return int(command(args))
    from simulations.targets import served_config

    with served_config(config, Path(args.out) if args.command != "replay" else args.file.parent) as server:
        args.served_server = server  # a fault campaign kills, pauses and restarts it
        return int(command(args))


def _served_config(args: argparse.Namespace) -> Path | None:
    """The target file a command reaches its target through: only one the command line (or its
    environment variable) names, never one a replay file records (docs/trust.md)."""
    if args.command in ("run", "clients") or (args.command == "xmemo" and args.xmemo_command == "run"):
        return args.config  # type: ignore[no-any-return]
    if args.command != "replay" or args.url or is_xmemo_replay(args.file):
        return None
    from simulations.replay import CONFIG_ENV

    if args.config is not None or os.environ.get(CONFIG_ENV):
        return args.config or Path(os.environ[CONFIG_ENV])
    return None


def _require_dask(args: argparse.Namespace) -> None:
    """A hunt (more than one shard, or a scheduler) runs on Dask, an extra: without it, one line
    naming the pip command, before anything starts. ``--workers 1`` runs in this process alone."""
    if getattr(args, "scheduler", None) is None and (getattr(args, "workers", None) or 1) <= 1:
        return
    flag = "--scheduler" if args.scheduler is not None else "--workers"
    try:
        require("hunt", f"{flag} (a hunt on Dask)")
    except MissingExtra as exc:
        raise SimulationError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    from refkit.args import sigterm_as_interrupt

    try:
        args = _build_parser().parse_args(argv)
        _require_dask(args)
        command = {"check": check_file, "run": run, "replay": replay, "clients": clients, "xmemo": xmemo}[args.command]
        with sigterm_as_interrupt():  # a cancelled job cleans up as Ctrl-C does
            code = _served(command, args)
        sys.stdout.flush()  # a reader that went away shows here, inside this handler, not at exit
        return code
    except SimulationError as exc:
        print(f"aidememo-sim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("aidememo-sim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`)
        return reader_gone()


if __name__ == "__main__":
    sys.exit(main())
