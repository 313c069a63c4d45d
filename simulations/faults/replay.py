"""A fault finding again: its replay file, ``aidememo-sim replay`` of it, and its shrinking.

A fault campaign's history is the network's, so a fault finding is not replayed operation by
operation, as a race found on the embedded reference is: it is run again, the same campaign from
the same seed (the same plan of races, the same faults at the same batches, on the same number
of servers), and it reproduces when the same rule is broken again. The replay file
(``replay.json`` beside the fault reports) holds what that needs and nothing secret: the
campaign (``run``, ``clients`` or ``xmemo``) and its settings, the seed, the fault kinds, the
batches (rounds) the run reached, the batches whose faults are kept (a shrunk schedule) and the
findings. The target is the one the command line names (``--config``), and so is a client class
(``--client``): a replay file is data, and never names the server it starts or code it loads.

Shrinking keeps fewer faults while the finding still shows (as ``simulations.shrink`` cuts
batches of a race): first the fault of the last batch alone, then each other fault left out in
turn, newest first, each cut kept when a rerun breaks the same rule; a few reruns at most,
since each restarts servers. A rerun goes up to ``AFTER_BATCHES`` past the finding's batch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeAlias

from refkit.files import write_atomic
from refkit.jsonvalue import loads
from simulations.errors import SimulationError
from simulations.faults.nemesis import Server
from simulations.faults.run import FaultRun, run_fault_campaign
from simulations.faults.schedule import FAULT_KINDS, SERVED_KINDS, FaultSchedule

__all__ = ["COMMANDS", "FORMAT", "FaultCase", "Rerun", "SHRINK_RUNS", "export_finding", "is_fault_replay",
           "load_case", "replay_file", "replay_faults", "rerun", "shrink_faults", "write_replay"]

FORMAT = "aidememo-sim-fault-replay/1"
SHRINK_RUNS = 3  # reruns a shrinking may spend: each kills and restarts servers
# Batches a rerun may go past the finding's: what a fault broke often shows only in the writes
# after the restart, which the network may put in the next batch (the run stops at a finding).
AFTER_BATCHES = 3
_MAX_BYTES = 16 * 1024 * 1024
COMMANDS = ("run", "clients", "xmemo")  # the campaigns a finding comes from: run, clients and xmemo run
# A rerun of a case with the faults of these batches (None: all), its history (run's) there.
Rerun: TypeAlias = Callable[["FaultCase", frozenset[int] | None, Path], FaultRun]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultCase:
    """What runs a fault campaign again: the same seed, faults, actors and batches."""

    seed: int
    kinds: tuple[str, ...]
    servers: int  # the target file's servers the faults were drawn for
    actors: int
    batches: int  # the batches the run reached (it stopped at its finding)
    budget_s: float
    keep: frozenset[int] | None  # the batches whose faults are kept (None: every fault of the seed)
    rules: tuple[str, ...]  # the rules its findings broke
    command: str = "run"  # the campaign: run, clients or xmemo (run)
    clients: int = 0  # clients only: the racing clients per handoff, the loss, the client class named
    loss: float = 0.0
    client: str | None = None

    def to_json(self, run: FaultRun) -> dict[str, Any]:
        schedule = FaultSchedule(self.seed, self.kinds, servers=self.servers, keep=self.keep)
        extra = {"clients": self.clients, "loss": self.loss, "client": self.client} if self.command == "clients" else {}
        return {"format": FORMAT, "command": self.command, "seed": self.seed, "kinds": list(self.kinds),
                "servers": self.servers, "actors": self.actors, "batches": self.batches, "budget_s": self.budget_s,
                **extra, "keep": None if self.keep is None else sorted(self.keep), "rules": list(self.rules),
                "schedule": [f.to_json() for f in schedule.upto(self.batches)],
                "findings": [{"rule": f.rule, "requirements": list(f.requirements), "explanation": f.explanation}
                             for f in run.findings]}


def write_replay(case: FaultCase, run: FaultRun, out: Path) -> Path:
    """``out/replay.json``.

    Raises:
        SimulationError: it cannot be written.
    """
    path = out / "replay.json"
    try:
        out.mkdir(parents=True, exist_ok=True)  # the clients' and XMemo's reports come after it
        write_atomic(path, json.dumps(case.to_json(run), indent=1) + "\n")
    except OSError as exc:
        raise SimulationError(f"cannot write the replay file {path}: {exc.strerror or exc}") from None
    return path


def _read(path: Path) -> object:
    try:
        with path.open("rb") as file:
            raw = file.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise SimulationError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_BYTES:
        raise SimulationError(f"{path}: larger than a replay file can be")
    try:
        return loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SimulationError(f"{path}: not a JSON replay file ({exc})") from None


def is_fault_replay(path: Path) -> bool:
    """Whether ``path`` is a fault campaign's replay file (anything unreadable: not one)."""
    try:
        doc = _read(path)
    except SimulationError:
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def load_case(path: Path) -> FaultCase:
    """The case a fault replay file holds.

    Raises:
        SimulationError: the file is not one, or a value in it is out of shape (one line).
    """
    doc = _read(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SimulationError(f"{path}: not a fault replay file ({FORMAT})")

    def whole(key: str, low: int) -> int:
        value = doc.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise SimulationError(f"{path}: {key} must be a whole number from {low}")
        return value

    kinds, keep, rules, budget = doc.get("kinds"), doc.get("keep"), doc.get("rules"), doc.get("budget_s")
    if not isinstance(kinds, list) or not kinds or any(k not in FAULT_KINDS for k in kinds):
        raise SimulationError(f"{path}: kinds must name faults among {', '.join(FAULT_KINDS)}")
    if keep is not None and (not isinstance(keep, list) or not all(isinstance(b, int) for b in keep)):
        raise SimulationError(f"{path}: keep must be null or a list of batch numbers")
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise SimulationError(f"{path}: rules must be a list of rule names")
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) or not 0 < budget <= 86_400:
        raise SimulationError(f"{path}: budget_s must be a number of seconds")
    command = doc.get("command", "run")  # files written before clients and xmemo findings had one: run's
    if command not in COMMANDS:
        raise SimulationError(f"{path}: command must be one of {', '.join(COMMANDS)}")
    case = FaultCase(seed=whole("seed", 0), kinds=tuple(kinds), servers=whole("servers", 1),
                     actors=whole("actors", 2), batches=whole("batches", 1), budget_s=float(budget),
                     keep=None if keep is None else frozenset(keep), rules=tuple(rules), command=command)
    if command != "clients":
        return case
    loss, client = doc.get("loss"), doc.get("client")
    if not isinstance(loss, (int, float)) or isinstance(loss, bool) or not 0 <= loss < 1:
        raise SimulationError(f"{path}: loss must be a number from 0 up to 1")
    if client is not None and not isinstance(client, str):
        raise SimulationError(f"{path}: client must be null or the client class's FILE.py:NAME")
    return replace(case, clients=whole("clients", 1), loss=float(loss), client=client)


def rerun(*, target: Callable[[], Any], server: Server | None, client_class: Any = None) -> Rerun:
    """Runs of a case's campaign again, each on ``target()`` (an ``HttpTarget``; for XMemo, its
    ``(url, keys, timeout_s)``) and up to ``AFTER_BATCHES`` past the batches the case reached;
    ``client_class``: the clients' class (None: the kit's)."""
    def again(case: FaultCase, keep: frozenset[int] | None, history: Path) -> FaultRun:
        started, limit = time.monotonic(), case.batches + AFTER_BATCHES
        if case.command == "xmemo":
            from simulations.faults.xmemo import run_xmemo_faults

            url, keys, timeout_s = target()
            return run_xmemo_faults(url=url, keys=keys, timeout_s=timeout_s, server=server, kinds=case.kinds,
                                    seed=case.seed, budget_s=case.budget_s, max_batches=limit, started=started,
                                    keep=keep)
        if case.command == "clients":
            from aidememo_client.client import AideMemoClient
            from simulations.faults.clients import run_client_faults

            return run_client_faults(target=target(), server=server, kinds=case.kinds, seed=case.seed, rounds=limit,
                                     workers=case.clients, loss=case.loss, client_class=client_class or AideMemoClient,
                                     budget_s=case.budget_s, started=started, keep=keep)
        return run_fault_campaign(target=target(), server=server, kinds=case.kinds, seed=case.seed,
                                  actors=case.actors, budget_s=case.budget_s, max_batches=limit,
                                  history_file=history, started=started, keep=keep)

    return again


def _shows(run: FaultRun, rules: Sequence[str]) -> bool:
    return any(f.rule in rules for f in run.findings)


def replay_faults(case: FaultCase, again: Rerun, *, server: Server | None, times: int, out: Path,
                  say: Callable[[str], None]) -> int:
    """Run ``case`` again ``times`` times (``again``); how many broke its rule again.

    Raises:
        SimulationError: a kill or pause without a served server, or a server that did not come back.
    """
    needs = [kind for kind in case.kinds if kind in SERVED_KINDS]
    if needs and server is None:
        raise SimulationError(f"this finding's faults include {needs[0]}: give --config with the target file whose "
                              "[serve] command starts the server")
    shown = 0
    for n in range(1, times + 1):
        run = again(case, case.keep, out / f"replay-{n}.jsonl")
        rules = sorted({f.rule for f in run.findings})
        shown += _shows(run, case.rules)
        say(f"run {n}: {', '.join(rules) or 'no finding'} ({run.result.batches} batches; {run.nemesis.summary()})")
    say(f"reproduced {shown}/{times}")
    return shown


def shrink_faults(case: FaultCase, run: FaultRun, again: Rerun, *, out: Path,
                  say: Callable[[str], None]) -> FaultCase:
    """``case`` with fewer faults that still breaks one of its rules (at most ``SHRINK_RUNS`` reruns)."""
    faults = [f.batch for f in run.nemesis.schedule.upto(case.batches)]
    if len(faults) <= 1:
        return case
    kept = list(faults)
    tries = [[faults[-1]], *([b for b in faults if b != cut] for cut in reversed(faults[:-1]))]
    for n, candidate in enumerate(tries[:SHRINK_RUNS], start=1):
        candidate = [b for b in candidate if b in kept] or kept[-1:]
        if len(candidate) >= len(kept):
            continue
        if _shows(again(case, frozenset(candidate), out / f"shrink-{n}.jsonl"), case.rules):
            kept = candidate
            if len(kept) == 1:
                break
    say(f"shrunk to {len(kept)} of {len(faults)} faults (batches {', '.join(map(str, kept))})")
    return replace(case, keep=frozenset(kept))


def export_finding(run: FaultRun, case: FaultCase, again: Rerun, *, out: Path, config: Path | None,
                   say: Callable[[str], None]) -> Path:
    """A fault run's findings (``case``, its keep and rules aside) shrunk by reruns (``again``) and
    written as a replay file; the lines that say how to replay it are said. Returns the file.

    Raises:
        SimulationError: the file cannot be written, or a server did not come back while shrinking.
    """
    case = replace(case, batches=run.result.batches, keep=None,
                   rules=tuple(dict.fromkeys(f.rule for f in run.findings)))
    say("shrinking the fault schedule (a cut is kept when a rerun breaks the same rule) ...")
    case = shrink_faults(case, run, again, out=out, say=say)
    path = write_replay(case, run, out)
    where = f" --config {config}" if config is not None else ""
    client = f" --client {case.client}" if case.client is not None else ""
    replay = f"aidememo-sim replay {path}{where}{client} --times 5"
    say(f"replay file: {path}")
    say(f"replay it, with its shrunk fault schedule: {replay}")
    if case.command == "xmemo":
        return path  # the standalone scripts speak AideMemo's protocol
    script = _write_script(run, out, config, replay)
    say(f"standalone script (exit 1: shown, 0: not shown, 2: cannot run): SERVER_PID_FILE=FILE RESTART_COMMAND=... "
        f"BASE_URL=http://HOST:PORT sh {script}")
    return path


def _write_script(run: FaultRun, out: Path, config: Path | None, replay: str) -> Path:
    """The first finding's reproduction record and its script, beside the replay file.

    Raises:
        SimulationError: they cannot be written.
    """
    import os

    from conformance.errors import ConfigError
    from conformance.profiles.aidememo.settings import target_settings
    from conformance.reproduction.script import render_script
    from simulations.faults.standalone import fault_reproduction

    template = None
    if config is not None:
        try:
            template = target_settings(str(config)).provision_command
        except ConfigError:
            pass  # the run read this file a moment ago; a file changed since gives no template
    first = run.findings[0]
    repro = fault_reproduction(first.rule, first.requirements, first.explanation, template=template,
                               workdir=os.getcwd(), replay=replay)
    script = out / "finding.sh"
    try:
        write_atomic(out / "finding.reproduction.json", repro.dumps())
        write_atomic(script, render_script(repro), mode=0o755)
    except OSError as exc:
        raise SimulationError(f"cannot write the finding's script to {out}: {exc.strerror or exc}") from None
    return script


def replay_file(path: Path, *, config: Path | None, server: Server | None, times: int, client: str | None,
                say: Callable[[str], None]) -> int:
    """``aidememo-sim replay`` of a fault replay file against the target file ``config`` (with the
    client class ``client``, FILE.py:NAME, for a clients finding found with one); the number of
    runs that broke its rule again.

    Raises:
        SimulationError: no target file, a bad replay file, a client class missing or not the
            one the finding names, or a server that did not come back.
    """
    from simulations.targets import load_factory, target_from_config

    case = load_case(path)
    if config is None:
        raise SimulationError("a fault finding replays against a target file: give --config (a replay file never "
                              "names the server it starts)")
    if client != case.client and case.command == "clients":
        if case.client is None:
            raise SimulationError("this finding was found with the kit's own client: drop --client")
        raise SimulationError(f"this finding was found with the client class {case.client}: give --client "
                              f"{case.client} (a replay file never loads the code it names)")
    if client is not None and case.command != "clients":
        raise SimulationError(f"--client applies to a clients finding; this one is {case.command}'s")
    found = 1 if server is None else 1 + len(server.others)
    if found != case.servers:
        say(f"note: the faults were drawn for {case.servers} servers, this target file starts {found}: the kills and "
            f"pauses fall on other servers")

    def fresh() -> Any:
        if case.command == "xmemo":
            from simulations.faults.xmemo import xmemo_target

            return xmemo_target(config)  # keys of a fresh owner
        target = target_from_config(config, case.actors)
        if target is None:
            raise SimulationError(f"{config} names the embedded reference; a fault finding needs a server")
        return target

    client_class = load_factory(client, "client class") if client is not None else None
    campaign = {"run": "", "clients": "the clients' races of ", "xmemo": "the XMemo races of "}[case.command]
    say(f"replaying {campaign}seed {case.seed}, faults {','.join(case.kinds)}"
        f"{'' if case.keep is None else ' of batches ' + ', '.join(map(str, sorted(case.keep)))}, "
        f"over up to {case.batches + AFTER_BATCHES} {'rounds' if case.command == 'clients' else 'batches'}, "
        f"{times} time(s)")
    again = rerun(target=fresh, server=server, client_class=client_class)
    return replay_faults(case, again, server=server, times=times, out=path.parent, say=say)
