"""Start-up cost of the local CLI on a realistic store, against `python -c pass` in the same run.

Agents call `aidememo-ref` dozens of times per task, so each local command should cost at most
about 3x a bare interpreter start. This builds a store with 10,000 facts and 1,000 handoffs,
then times `fact add`, `handoff inbox` and `handoff accept` as fresh processes (the way an agent
calls them), and one stdio MCP `tools/call` round trip the way upstream's SDK makes it (a fresh
`mcp` process fed `initialize` and one `aidememo_handoff_inbox` call), all interleaved with the
baseline so machine noise hits both alike. Each figure is given twice: wall time, and the CPU
time (user + system) the process used, which a machine loaded by other work disturbs less.
`remote inbox` is the same inbox through a named remote profile (`handoff --remote-profile bench
inbox`) against a reference server this script serves on loopback: the start-up of the remote
route (the profile, the client's plain-socket wire for http://, two GETs).

``--local-profile`` times the ``aidememo-local`` conformance profile against this kit's CLI
instead (the whole ``aidememo-conformance run --profile aidememo-local``, serial and with
``-n 2``), interleaved with its baseline: as many ``python -c pass`` starts, one after another,
as the profile ran commands (each of its steps is a CLI process).

Every process reads compiled bytecode from a private cache (``PYTHONPYCACHEPREFIX`` in the
temporary directory, filled by the warm-up round), as any installed copy does after its first
run; ``--no-bytecode-cache`` times the interpreter compiling the kit's modules on every start
instead (what ``PYTHONDONTWRITEBYTECODE=1`` without ``.pyc`` files gives).

    python bench/cli.py [--repeat 15] [--facts 10000] [--handoffs 1000] [--seed N] [--no-bytecode-cache]
    python bench/cli.py --local-profile [--repeat 3] [--seed N] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aidememo_cli._local import _assignments as assignments  # noqa: E402
from aidememo_cli._local import _memory as memory  # noqa: E402
from aidememo_cli._local._facttypes import FactType  # noqa: E402
from aidememo_cli._local._records import AgentProfile, AgentType  # noqa: E402
from aidememo_cli._local._store import LocalStore  # noqa: E402

from _conditions import Window, closing, opening  # noqa: E402

ENTRY = "import sys; from aidememo_cli import main; sys.exit(main(sys.argv[1:]))"
RECEIVER = "bench-receiver"
SOURCE = "bench-team"


def populate(path: str, facts: int, handoffs: int, rng: random.Random) -> tuple[str, list[str]]:
    """Return (the session used by `fact add`, pending handoff ids addressed to RECEIVER)."""
    store = LocalStore(path)
    now = 1_700_000_000_000
    types = list(FactType)
    pending: list[str] = []
    with store.transaction(write=True):
        sessions = [memory.session_new(store, f"topic {i}", SOURCE, now + i) for i in range(max(1, facts // 100))]
        for index in range(facts):
            memory.add_fact(store, content=f"fact {index} " + "lorem ipsum " * rng.randint(1, 20),
                            fact_type=rng.choice(types), entities=[f"Entity{rng.randint(0, 50)}"], tags=(),
                            source_id=SOURCE, actor_id="bench-sender", now_ms=now + index, session=rng.choice(sessions))
        store.put_agent(AgentProfile(alias=RECEIVER, agent=AgentType.MANUAL, source_id=SOURCE))
        for index in range(handoffs):
            to_actor = RECEIVER if index % 2 == 0 else f"actor-{rng.randint(0, 20)}"
            record = assignments.dispatch(store, assignments.NewAssignment(
                session_id=rng.choice(sessions).name, source_id=SOURCE, from_actor="bench-sender", to_actor=to_actor,
                to_agent="manual", focus=f"task {index}", done_when="tests pass"), now + index)
            if to_actor == RECEIVER:
                pending.append(record.handoff_id)
    store.close()
    return sessions[0].name, pending


@contextlib.contextmanager
def remote_profile(tmp: str, env: dict[str, str]) -> Iterator[None]:
    """Serve a reference ledger on loopback and log profile ``bench`` in (in ``env``'s new HOME)."""
    from aidememo_ref import ReferenceLedger, serve_in_thread

    env["HOME"] = os.path.join(tmp, "home")
    secret, token = f"bench-token-{os.urandom(16).hex()}", os.path.join(tmp, "bench.token")
    with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
        handle.write(secret + "\n")
    ledger = ReferenceLedger(os.path.join(tmp, "ssot.sqlite"))
    ledger.provision(tenant_id="bench", project_id="bench", actor_id=RECEIVER, token=secret)
    try:
        with serve_in_thread(ledger) as url:
            subprocess.run([sys.executable, "-c", ENTRY, "auth", "login", url, "--profile", "bench", "--project-id",
                            "bench", "--token-file", token], env=env, check=True, stdout=subprocess.DEVNULL)
            yield
    finally:
        ledger.close()


MCP_INPUT = (
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"aidememo-agent-sdk"}}}\n'
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"aidememo_handoff_inbox",'
    f'"arguments":{{"action":"list","actor_id":"{RECEIVER}","source_id":"{SOURCE}","limit":20}}}}}}\n'
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, float]:
    """(wall ms, CPU ms) of one fresh process."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, input=stdin, stdout=subprocess.PIPE if stdin else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    cpu = _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"bench command failed: {' '.join(argv[3:])}: {done.stderr.strip()}")
    if stdin is not None and '"isError"' in done.stdout or (stdin is not None and done.stdout.count("\n") != 2):
        raise SystemExit(f"bench MCP round trip failed: {done.stdout[:300]}")
    return elapsed * 1000, cpu * 1000


def _profile_run(env: dict[str, str], report: str, seed: int, workers: str | None) -> tuple[float, int, int]:
    """(wall s, commands run, checks) of one whole aidememo-local profile run; exits unless every check passed."""
    argv = [sys.executable, "-m", "conformance.cli", "run", "--profile", "aidememo-local", "--seed", str(seed),
            "--report-dir", report, *(["-n", workers] if workers else [])]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    results = json.loads(Path(report, "results.json").read_text()) if done.returncode == 0 else None
    if results is None or results["counts"]["PASS"] != sum(results["counts"].values()):
        raise SystemExit(f"profile run failed (exit {done.returncode}): {done.stdout[-1500:]}")
    return wall, int(results["requests"]), sum(results["counts"].values())


def local_profile(env: dict[str, str], repeat: int, seed: int) -> None:
    """The aidememo-local profile, serial and on two workers, beside its commands' bare starts."""
    runs: dict[str, list[float]] = {"serial": [], "-n 2": [], "baseline": []}
    commands = checks = 0
    window = Window()
    with tempfile.TemporaryDirectory() as tmp:
        _profile_run(env, os.path.join(tmp, "warm"), seed, None)  # bytecode, page cache
        for i in range(repeat):
            for name, workers in (("serial", None), ("-n 2", "2")):
                wall, commands, checks = _profile_run(env, os.path.join(tmp, f"{name}-{i}"), seed, workers)
                runs[name].append(wall)
            started = time.perf_counter()
            for _ in range(commands):
                subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            runs["baseline"].append(time.perf_counter() - started)
    base = statistics.median(runs["baseline"])
    print(f"aidememo-local profile: {checks} checks, {commands} CLI commands per run, {repeat} runs each")
    print(f"{'run':<32} {'median s':>9} {'min s':>7} {'max s':>7} {'x baseline':>11}")
    for name, label in (("baseline", f"{commands} x python -c pass"), ("serial", "profile, serial"),
                        ("-n 2", "profile, -n 2")):
        values = runs[name]
        print(window.mark(f"{label:<32} {statistics.median(values):>9.2f} {min(values):>7.2f} {max(values):>7.2f}"
                          f" {statistics.median(values) / base:>11.2f}"))
    print(window.mark(f"target: the profile in at most 15 s (serial {statistics.median(runs['serial']):.1f} s,"
                      f" -n 2 {statistics.median(runs['-n 2']):.1f} s)"))


def _environment(no_cache: bool, tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "HERMES_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    if no_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
        print("bytecode: none cached (each start compiles the kit's modules)")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        print("bytecode: cached after the warm-up round, as in any installed copy")
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--handoffs", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="compile the kit's modules on every start (no .pyc cache)")
    parser.add_argument("--local-profile", action="store_true",
                        help="time the aidememo-local conformance profile instead (default --repeat 3)")
    args = parser.parse_args()
    opening("bench/cli.py (the timed processes' bytecode caching is printed below)")
    try:
        return _main(args)
    finally:
        closing()


def _main(args: argparse.Namespace) -> int:
    if args.local_profile:
        repeat = 3 if "--repeat" not in sys.argv else args.repeat
        if repeat < 1:
            print("error: need --repeat >= 1", file=sys.stderr)
            return 2
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
        print(f"seed={seed} (replay: python bench/cli.py --local-profile --seed {seed} --repeat {repeat}"
              f"{' --no-bytecode-cache' if args.no_bytecode_cache else ''})")
        with tempfile.TemporaryDirectory() as tmp:
            local_profile(_environment(args.no_bytecode_cache, tmp), repeat, seed)
        return 0
    if args.repeat < 3 or args.handoffs < 2 * args.repeat or args.facts < 1:
        print("error: need --repeat >= 3, --handoffs >= 2 x repeat and --facts >= 1", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed={seed} (replay: python bench/cli.py --seed {seed} --repeat {args.repeat}"
          f" --facts {args.facts} --handoffs {args.handoffs}{' --no-bytecode-cache' if args.no_bytecode_cache else ''})")
    rng = random.Random(seed)
    window = Window()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        store = os.path.join(tmp, "bench.sqlite")
        started = time.perf_counter()
        session_id, pending = populate(store, args.facts, args.handoffs, rng)
        print(f"store: {args.facts} facts, {args.handoffs} handoffs, built in {time.perf_counter() - started:.1f} s")
        env = _environment(args.no_bytecode_cache, tmp)
        cli = [sys.executable, "-c", ENTRY, "--store", store]
        stack.enter_context(remote_profile(tmp, env))
        commands = {
            "python -c pass": lambda i: [sys.executable, "-c", "pass"],
            "fact add": lambda i: [*cli, "fact", "add", f"bench fact {i}", "--type", "note", "--source-id", SOURCE,
                                   "--actor-id", RECEIVER, "--session-id", session_id],
            "handoff inbox": lambda i: [*cli, "handoff", "inbox", "--actor-id", RECEIVER],
            "handoff accept": lambda i: [*cli, "handoff", "accept", "--actor-id", RECEIVER, pending[i]],
            "mcp tools/call": lambda i: [*cli, "mcp"],
            "remote inbox": lambda i: [*cli, "handoff", "--remote-profile", "bench", "inbox"],
        }
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for name, build in commands.items():  # one warm-up each (page cache, .pyc)
            timed(build(len(pending) - 1 - list(commands).index(name)), env, MCP_INPUT if name.startswith("mcp") else None)
        for i in range(args.repeat):
            for name, build in commands.items():
                samples[name].append(timed(build(i), env, MCP_INPUT if name.startswith("mcp") else None))
    wall = {name: [w for w, _ in values] for name, values in samples.items()}
    cpu = {name: [c for _, c in values] for name, values in samples.items()}
    base, base_cpu = statistics.median(wall["python -c pass"]), statistics.median(cpu["python -c pass"])
    print(f"{'command':<16} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x baseline':>11}"
          f" {'cpu ms':>8} {'cpu x':>6}")
    for name in samples:
        median, cpu_median = statistics.median(wall[name]), statistics.median(cpu[name])
        print(window.mark(f"{name:<16} {median:>10.1f} {min(wall[name]):>8.1f} {max(wall[name]):>8.1f} "
                          f"{median / base:>11.2f} {cpu_median:>8.1f} {cpu_median / base_cpu:>6.2f}"))
    local = [k for k in samples if k not in ("python -c pass", "mcp tools/call", "remote inbox")]
    worst = max(statistics.median(wall[k]) for k in local) / base
    worst_cpu = max(statistics.median(cpu[k]) for k in local) / base_cpu
    print(window.mark(f"worst local command: {worst:.2f}x baseline wall, {worst_cpu:.2f}x cpu (target <= 3x)"))
    print(window.mark(f"mcp round trip (process start, initialize, one tools/call): "
                      f"{statistics.median(wall['mcp tools/call']) / base:.2f}x baseline wall,"
                      f" {statistics.median(cpu['mcp tools/call']) / base_cpu:.2f}x cpu"))
    print(window.mark(f"remote inbox: {statistics.median(wall['remote inbox']) / base:.2f}x baseline wall,"
                      f" {statistics.median(cpu['remote inbox']) / base_cpu:.2f}x cpu;"
                      f" {statistics.median(cpu['remote inbox']) / statistics.median(cpu['handoff inbox']):.2f}x "
                      "the local inbox's cpu"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
