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
import importlib
import json
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refkit.args import reader_gone
from refkit.extras import MissingExtra, require
from refkit.version import VERSION
from simulations.linearizability.checker import DEFAULT_MAX_CONFIGS, Model, Verdict
from simulations.errors import SimulationError

if TYPE_CHECKING:
    from simulations.faults.run import FaultRun
    from simulations.targets import HttpTarget

__all__ = ["main"]

# ``--help``'s text: the module docstring's paragraphs before the exit codes, which the epilog gives.
DESCRIPTION = " ".join(__doc__.split("\n\nExit codes:")[0].split())
EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3


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


# Named models for ``check``, imported on first use so that checking a register never loads
# the ledger model. A new model is one line here.
MODELS: dict[str, str] = {
    "cas-register": "simulations.linearizability.register:CAS_REGISTER",
    "kv": "simulations.linearizability.kv:KV",
    "ledger": "simulations.ledger:LEDGER",
}


def _model(name: str) -> Model[Any]:
    module, attr = MODELS[name].split(":")
    model: Model[Any] = getattr(importlib.import_module(module), attr)
    return model


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
                          "file's [serve] server; drop-answers, reset: the campaign's own proxy in front of it)")
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


def _check(args: argparse.Namespace) -> int:
    from simulations.linearizability.checker import check
    from simulations.linearizability.porcupine import load

    header, history = load(args.file, args.format)
    name = args.model or header.model
    if name is None:
        raise SimulationError(f"{args.file} names no model; give --model ({', '.join(MODELS)})")
    if name not in MODELS:
        raise SimulationError(f"{args.file} names model {name!r}; this kit knows {', '.join(MODELS)}")
    model = _model(name)
    if hasattr(args, "init"):
        model = model.with_init(args.init)
    elif header.has_init and name == header.model:
        model = model.with_init(header.init)
    try:
        result = check(model, history, budget_s=args.budget, max_configs=args.max_configurations,
                       progress=lambda line: print(line, file=sys.stderr))
    except RecursionError:  # a value the loader read, too deep for the model's comparisons: a crafted file
        raise SimulationError(f"{args.file}: a value nested too deeply to check") from None
    print(result.summary())
    violation = result.violation
    if violation is not None:
        print(violation.explanation)
        if not violation.minimal:
            print("(the shrinking budget ran out: the set above may not be the smallest)")
    if args.html:
        from simulations.linearizability.timeline import write_timeline

        write_timeline(
            args.html,
            history,
            title=f"{args.file.name}: {result.verdict.value}",
            highlight=violation.witness if violation else (),
            explanation=violation.explanation if violation else result.summary(),
        )
        print(f"timeline: {args.html}")
    return {Verdict.OK: EXIT_OK, Verdict.ILLEGAL: EXIT_VIOLATION, Verdict.UNKNOWN: EXIT_UNKNOWN}[
        result.verdict
    ]


def _parse_tokens(pairs: Sequence[str], flag: str = "--token") -> dict[str, str]:
    """``ACTOR=SECRET``, ``ACTOR=@FILE`` (the file's first line) or, for ``--token``, ``ACTOR`` alone
    (its ``TOKEN_<ACTOR>`` variable): a secret on the command line shows in ``ps`` to every user
    of the machine, a file or a variable does not."""
    from simulations.targets import token_variable

    tokens = {}
    for pair in pairs:
        actor, sep, token = pair.partition("=")
        if flag == "--token" and actor and not sep:
            token = os.environ.get(token_variable(actor), "")
            if not token:
                raise SimulationError(f"--token {actor} reads {token_variable(actor)}, which is not set")
        elif not sep or not actor or not token:
            raise SimulationError(f"{flag} takes ACTOR={flag.lstrip('-').upper()} or ACTOR=@FILE, not {pair!r}")
        tokens[actor] = _secret(token, flag)
    return tokens


def _secret(value: str, flag: str) -> str:
    """``value``, or for ``@FILE`` the file's first line; the file must be its owner's alone (0600)."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:])
    try:
        if path.stat().st_mode & 0o077:
            raise SimulationError(f"{flag}: {path} must not be readable by group or others (chmod 600)")
        secret = path.read_text(encoding="utf-8").split("\n", 1)[0].rstrip("\r")
    except OSError as exc:
        raise SimulationError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise SimulationError(f"{flag}: {path} is not UTF-8") from None
    if not secret:
        raise SimulationError(f"{flag}: {path} is empty")
    return secret


def _target_from_args(args: argparse.Namespace, actors: int | Sequence[str] | None = None) -> HttpTarget | None:
    from simulations.targets import HttpTarget, target_from_config

    if args.config is not None:
        return target_from_config(args.config, getattr(args, "actors", 3) if actors is None else actors)
    if args.url is None:
        if args.token or args.project:
            raise SimulationError("--token and --project need --url")
        return None
    if not args.project:
        raise SimulationError("--url needs --project")
    return HttpTarget(args.url, args.project, _parse_tokens(args.token))


def _rerun_command(args: argparse.Namespace, seed: int) -> str:
    """The one command that runs this campaign again (tokens shown as variables, never values)."""
    parts = ["aidememo-sim", "run", "--seed", str(seed), "--actors", str(args.actors), "--budget", f"{args.budget:g}",
             *(["--batches", str(args.batches)] if args.batches else []), *_target_words(args)]
    if args.ledger:
        parts += ["--ledger", args.ledger]
    if getattr(args, "faults", None):
        parts += ["--faults", ",".join(args.faults)]
    from simulations.plan import SEGMENT_BATCHES

    if getattr(args, "segment", SEGMENT_BATCHES) != SEGMENT_BATCHES:
        parts += ["--segment", str(args.segment)]
    return " ".join(parts)


def _target_words(args: argparse.Namespace) -> list[str]:
    parts: list[str] = []
    if args.config is not None:
        parts += ["--config", str(args.config)]
    if args.url is not None:
        parts += ["--url", args.url, "--project", str(args.project)]
        parts += _secret_words("--token", "TOKEN", [pair.partition("=")[0] for pair in args.token])
    return parts


def _secret_words(flag: str, variable: str, actors: Sequence[str]) -> list[str]:
    """A rerun command names secrets, never shows them: ``--token ACTOR`` (read from its
    ``TOKEN_<ACTOR>`` variable, so the token is never in the process's arguments) or
    ``flag ACTOR=$VARIABLE_ACTOR`` per actor."""
    parts: list[str] = []
    for actor in actors:
        name = f"${variable}_{actor.replace('-', '_').upper()}" if actor else f"${variable}"
        parts += [flag, actor if flag == "--token" else f"{actor}={name}" if actor else name]
    return parts


def _run(args: argparse.Namespace) -> int:
    from simulations.campaign import run_campaign
    from simulations.replay import export_failure
    from simulations.shrink import URL_RATE_RUNS, URL_TRIES, reproduction, shrink, shrink_over_http
    from simulations.targets import load_factory

    seed = _seed_of(args)
    if _server_per_shard(args):
        return _hunt(args, seed, None)  # each shard starts, provisions and faults a server of its own
    target = _target_from_args(args)
    if target is not None and args.ledger:
        raise SimulationError("--ledger applies to the embedded reference, not to --url or --config")
    factory = load_factory(args.ledger)
    if args.faults:
        return _fault_run(args, seed, target)
    if args.workers > 1 or args.scheduler is not None:
        if args.url is not None:
            raise SimulationError("--workers with --url would put every shard in one project; give a target file "
                                  "with a provisioning command (--config), which gives each shard its own")
        return _hunt(args, seed, target)
    where = "the embedded reference" if target is None else args.url or str(args.config)
    print(f"aidememo-sim run: seed {seed}, {args.actors} actors, budget {args.budget:g} s, against {where}")
    print(f"replay this run with: {_rerun_command(args, seed)}")
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
    rate = None
    print("shrinking ..." if target is None else
          f"shrinking over the URL (a cut is kept when one of {URL_TRIES} reruns with fresh ids fails) ...")
    result = shrink(result, factory) if target is None else shrink_over_http(result, target)
    print(f"shrunk to {result.plan.operations} operations in {len(result.plan.batches)} batches, "
          f"{len(result.plan.actors)} actors:")
    if result.finding is not None:
        print(result.finding.explanation)
    if target is not None:
        rate = (reproduction(result, target, URL_RATE_RUNS), URL_RATE_RUNS)
        print(f"over the URL the shrunk case reproduced {rate[0]}/{rate[1]} times (each with fresh ids)")
    paths = export_failure(result, Path(args.out), target="embedded" if target is None else "url",
                           url=None if target is None else target.url, factory=_factory_spec(args.ledger),
                           config=args.config, reproduction=rate)
    return _exported(paths, _replay_words(args, result.plan.project), rate)


def _fault_run(args: argparse.Namespace, seed: int, target: HttpTarget | None) -> int:
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
    command = _rerun_command(args, seed)
    print(f"replay this run with: {command}")
    out = Path(args.out) / f"faults-seed-{seed}"
    history_file = out / "history.jsonl"
    print(f"history: {history_file} (check it with: aidememo-sim check {history_file})")
    run = run_fault_campaign(target=target, server=getattr(args, "served_server", None), kinds=args.faults, seed=seed,
                             actors=args.actors, budget_s=args.budget, max_batches=args.batches,
                             history_file=history_file, started=started, progress=print)
    print(f"{run.result.batches} batches in {run.result.elapsed_s:.1f} s")
    return _fault_ending(run, out, command)


def _fault_ending(run: FaultRun, out: Path, command: str) -> int:
    """A fault campaign's recovery times, findings, reports and summary line; its exit code."""
    from simulations.faults.report import write_reports

    recovery = run.recovery()
    if recovery is not None:
        print(recovery)
    for finding in run.findings:
        print(f"finding: {finding.rule} ({', '.join(finding.requirements) or 'no requirement id'})")
        print(finding.explanation)
        print(f"replay it, with its fault schedule: {command}")
    paths, skipped = write_reports(run, out, command=command)
    for label, path in paths.items():
        print(f"{label}: {path}")
    if skipped is not None:
        print(skipped)
    print(run.summary())
    if run.findings:
        return EXIT_VIOLATION
    return EXIT_UNKNOWN if run.verdict is Verdict.UNKNOWN else EXIT_OK


def _fault_options(args: argparse.Namespace) -> None:
    """Faults that need what the command line does not give are refused before anything starts.

    Raises:
        SimulationError: kill or pause without a target file with [serve] (one line).
    """
    from simulations.faults.schedule import SERVED_KINDS

    if args.command not in ("run", "clients", "xmemo") or not getattr(args, "faults", None):
        return
    if args.command == "xmemo":
        from simulations.faults.xmemo import refuse_faults

        refuse_faults(args.faults)
    served = [kind for kind in args.faults if kind in SERVED_KINDS]
    if served and (args.config is None or not _has_serve(args.config)):
        raise SimulationError(f"--faults {served[0]} needs the target file's [serve] command (the kit must start "
                              f"the server to {served[0]} it); give --config with a [serve] table")


def _server_per_shard(args: argparse.Namespace) -> bool:
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
            return isinstance(tomllib.load(file).get("serve"), dict)
    except (OSError, tomllib.TOMLDecodeError):
        return False  # the target file's own loader says what is wrong with it


def _hunt(args: argparse.Namespace, seed: int, first: HttpTarget | None) -> int:
    from simulations.hunt import Display, run_hunt
    from simulations.shards import ShardSpec

    where = f"the Dask scheduler at {args.scheduler}" if args.scheduler else f"a local cluster of {args.workers}"
    print(f"aidememo-sim run: root seed {seed}, {args.workers} shards, {args.actors} actors, budget "
          f"{args.budget:g} s each, on {where}")
    command = _rerun_command(args, seed) + f" --workers {args.workers}"
    if args.scheduler:
        command += f" --scheduler {args.scheduler}"
    print(f"replay this hunt with: {command}")
    alone = _rerun_command(args, 0).replace(" --seed 0 ", " --seed {seed} ", 1)
    if args.faults:
        print(f"faults {','.join(args.faults)}: each shard starts a server of its own from {args.config}'s [serve] "
              f"command; its reports and history in {Path(args.out).resolve()}/faults-seed-SHARD_SEED/")
    else:
        print(f"histories: {Path(args.out).resolve()}/run-seed-SHARD_SEED.jsonl, one per shard")
    specs = [ShardSpec(root_seed=seed, index=index, actors=args.actors, budget_s=args.budget,
                       max_batches=args.batches, factory=_factory_spec(args.ledger), out=str(Path(args.out).resolve()),
                       faults=tuple(args.faults or ()), alone=alone if args.faults else "",
                       config=str(args.config.resolve()) if args.faults else None)
             for index in range(args.workers)]
    if first is not None:
        specs = _shard_projects(args, specs, first)
    hunt = run_hunt(specs, workers=args.workers, scheduler=args.scheduler, out=Path(args.out),
                    display=Display(sys.stdout))
    return _hunt_ending(hunt, command, alone)


def _shard_projects(args: argparse.Namespace, specs: list[Any], first: HttpTarget) -> list[Any]:
    """One project per shard, provisioned here by the target file's command (the workers only
    talk HTTP); the tokens travel to the workers inside the shard specs, never in a command.

    Raises:
        SimulationError: when the target file has fixed tokens (every shard would share a project).
    """
    from dataclasses import replace

    from simulations.targets import target_from_config

    actors = getattr(args, "actors", len(CLIENT_ACTORS))  # ``clients`` races three actors
    targets = [first, *(target_from_config(args.config, actors) for _ in specs[1:])]
    if len({t.project for t in targets if t is not None}) < len(specs):
        raise SimulationError(f"{args.config} has fixed tokens: shards need a project each, so give the target "
                              "file a provisioning command")
    print(f"provisioned {len(specs)} projects on {first.url}, one per shard")
    return [replace(spec, url=t.url, project=t.project, tokens=dict(t.tokens), timeout_s=t.timeout_s,
                    config=str(args.config)) for spec, t in zip(specs, targets) if t is not None]


def _hunt_ending(hunt: Any, command: str, shard_command: str) -> int:
    from simulations.hunt import summary

    for line in summary(hunt, shard_command):
        print(line)
    if hunt.interrupted:
        print(f"interrupted; run the hunt again with: {command}")
        return 130
    if hunt.findings:
        return EXIT_VIOLATION
    return EXIT_UNKNOWN if hunt.lost or any(o.verdict == Verdict.UNKNOWN.value for o in hunt.done) else EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from simulations.plan import Plan
    from simulations.replay import load_replay, replay_target, reproduce

    if _is_xmemo_replay(args.file):
        if args.url or args.config or args.token or args.project:
            raise SimulationError("an XMemo replay file runs on the embedded XMemo reference; drop --url, "
                                  "--config, --token and --project")
        return _xmemo_replay(args)
    if args.ledger and (args.url or args.config):
        raise SimulationError("--ledger applies to the embedded reference, not to --url or --config")
    doc = load_replay(args.file, ledger=_factory_spec(args.ledger), config=args.config, url_given=args.url is not None)
    http_target = None
    if doc["target"].get("kind") == "url":
        explicit = args.config is not None or args.url is not None
        actors = Plan.from_json(doc["plan"]).actors
        http_target = _target_from_args(args, actors) if explicit else replay_target(doc)
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


def _clients(args: argparse.Namespace) -> int:
    from aidememo_client.client import AideMemoClient
    from simulations.campaign import fresh_run_id
    from simulations.clients import run_client_campaign
    from simulations.targets import EmbeddedTarget, Target, load_factory

    _clients_options(args)
    seed = _seed_of(args)
    client_class = load_factory(args.client, "client class") if args.client else AideMemoClient
    if _server_per_shard(args):
        return _clients_hunt(args, seed, None)  # each shard starts, provisions and faults a server of its own
    http_target = _target_from_args(args)
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
    return _fault_ending(run, Path(args.out) / f"clients-faults-seed-{seed}", command)


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
                     *(["--client", str(_factory_spec(args.client))] if args.client else []), *_target_words(args),
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
                       factory=_factory_spec(args.client), protocol="clients", rounds=args.rounds,
                       clients=args.clients, loss=args.loss, faults=tuple(args.faults or ()),
                       out=str(Path(args.out).resolve()) if args.faults else None,
                       config=str(args.config.resolve()) if args.faults else None,
                       alone=_clients_command(args, "{seed}") if args.faults else "")
             for index in range(args.workers)]
    if first is not None:
        specs = _shard_projects(args, specs, first)
    hunt = run_hunt(specs, workers=args.workers, scheduler=args.scheduler, out=Path(args.out),
                    display=Display(sys.stdout))
    return _hunt_ending(hunt, command, _clients_command(args, "{seed}"))


CLIENT_ACTORS = ("agent-a", "agent-b", "agent-c")  # simulations.shards races the same three
CLIENTS = 3  # racing clients per handoff, by default


def _seed_of(args: argparse.Namespace) -> int:
    """The run's seed: the one given, else a fresh one (printed by the caller, so it replays)."""
    return args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)


def _factory_spec(ledger: str | None) -> str | None:
    """``--ledger FILE:NAME`` with FILE made absolute, so the exported replay runs from anywhere."""
    if not ledger:
        return None
    path, _, name = ledger.rpartition(":")
    return f"{Path(path).resolve()}:{name}"


def _replay_words(args: argparse.Namespace, project: str) -> list[str]:
    """What ``replay`` needs besides the file: a run by ``--url`` gives its target again (tokens as
    variables); a ledger factory or a target file, recorded in the file, is named again, since a
    replay file is data and its recorded code runs only when the command line names it."""
    from simulations.targets import named_words

    if args.url is None:
        return named_words(_factory_spec(args.ledger) if getattr(args, "ledger", None) else None, args.config)
    return ["--url", args.url, "--project", project,
            *_secret_words("--token", "TOKEN", [pair.partition("=")[0] for pair in args.token])]


def _exported(paths: dict[str, Path], replay_words: Sequence[str] = (),
              reproduction: tuple[int, int] | None = None) -> int:
    from simulations.replay import finding_lines, reproduce_lines

    for line in finding_lines(paths):
        print(line)
    for label, path in paths.items():
        print(f"{label}: {path}")
    for line in reproduce_lines(paths, reproduction, replay_words):
        print(line)
    return EXIT_VIOLATION


XMEMO_AGENTS = ("claude", "codex")  # simulations.xmemo.races.AGENTS, named here so --help needs no import


def _is_xmemo_replay(path: Path) -> bool:
    from refkit.jsonvalue import loads
    from simulations.xmemo.races import FORMAT

    try:
        doc = loads(path.read_bytes())
    except (OSError, ValueError):
        return False  # the AideMemo loader says what is wrong with the file
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def _xmemo_keys(pairs: Sequence[str]) -> dict[str, str]:
    if len(pairs) == 1 and "=" not in pairs[0]:
        return dict.fromkeys(XMEMO_AGENTS, _secret(pairs[0], "--key"))  # one key both agents share
    keys = _parse_tokens(pairs, "--key")
    unknown = sorted(set(keys) - set(XMEMO_AGENTS))
    if unknown:
        raise SimulationError(f"--key names unknown agent {unknown[0]!r}; the agents are {', '.join(XMEMO_AGENTS)}")
    return keys


def _xmemo_run(args: argparse.Namespace) -> int:
    from simulations.plan import SEGMENT_BATCHES
    from simulations.targets import load_factory
    from simulations.xmemo.races import export_failure, reference_factory, run_campaign, shrink

    seed = _seed_of(args)
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
        words += ["--url", args.url, *_secret_words("--key", "XMEMO_KEY",
                                                    [""] if shared else [p.partition("=")[0] for p in args.key])]
    if args.ledger:
        words += ["--ledger", args.ledger]
    if args.segment != SEGMENT_BATCHES:
        words += ["--segment", str(args.segment)]
    words += ["--config", str(args.config)] if args.config is not None else []
    if _server_per_shard(args):  # each shard starts, provisions and faults a server of its own
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

    paths = export_failure(run, Path(args.out), factory=_factory_spec(args.ledger))
    return _exported(paths, named_words(_factory_spec(args.ledger), None))


def _xmemo_target(args: argparse.Namespace) -> Any:
    from simulations.xmemo.races import XMemoHttpTarget

    if args.config is not None:
        from simulations.faults.xmemo import xmemo_target

        url, keys, timeout_s = xmemo_target(args.config)
        return XMemoHttpTarget(url, keys, timeout_s=timeout_s)
    return None if args.url is None else XMemoHttpTarget(args.url, _xmemo_keys(args.key))


def _xmemo_faults(args: argparse.Namespace, seed: int, target: Any, words: list[str]) -> int:
    import time

    from simulations.faults.xmemo import run_xmemo_faults

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
    return _fault_ending(run, Path(args.out) / f"xmemo-faults-seed-{seed}", command)


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
                       max_batches=args.batches, factory=_factory_spec(args.ledger), protocol="xmemo",
                       segment=args.segment, faults=tuple(args.faults or ()),
                       out=str(Path(args.out).resolve()) if args.faults else None,
                       config=str(args.config.resolve()) if args.faults else None, alone=alone if args.faults else "")
             for index in range(args.workers)]
    hunt = run_hunt(specs, workers=args.workers, scheduler=args.scheduler, out=Path(args.out),
                    display=Display(sys.stdout))
    return _hunt_ending(hunt, command, alone)


def _xmemo_replay(args: argparse.Namespace) -> int:
    from simulations.xmemo.races import reproduce

    reproduced = reproduce(args.file, times=args.times, factory=_factory_spec(args.ledger))
    print(f"reproduced {reproduced}/{args.times}")
    return EXIT_VIOLATION if reproduced else EXIT_OK


def _xmemo(args: argparse.Namespace) -> int:
    return _xmemo_run(args) if args.xmemo_command == "run" else _xmemo_replay(args)


def _served(command: Any, args: argparse.Namespace) -> int:
    """``run``, ``clients`` and ``replay`` against a target file whose ``[serve]`` server the kit
    starts for them (its log in ``--out``, or beside the replay file)."""
    _fault_options(args)
    config = _served_config(args)
    if config is None or _server_per_shard(args):
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
    if args.command != "replay" or args.url or _is_xmemo_replay(args.file):
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
        command = {"check": _check, "run": _run, "replay": _replay, "clients": _clients, "xmemo": _xmemo}[args.command]
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
