"""Wall and CPU time of the conformance suite: embedded, every profile, and a served target provisioned by command.

Prints figures, never asserts them; every ratio is against a baseline measured in the same run.

* start-up: ``python -c pass``, a local ``aidememo-ref`` read, and ``aidememo-ref bootstrap`` on
  a ledger file that exists (what the suite runs once per identity against a served reference);
  and the embedded reference's socket server started in a thread, asked once and stopped, against
  the same with uvicorn's own ``Server`` class (in this process);
* the embedded AideMemo profile, and every installed profile one after the other (the
  aidememo-local profile's CLI forked per command from a warm interpreter, as it runs by default,
  and beside it the same run with ``--cli``, each command a fresh interpreter), each without
  cached bytecode (``PYTHONDONTWRITEBYTECODE=1``, as these machines run, so every module is
  compiled and every check module assertion-rewritten) and with it (a private
  ``PYTHONPYCACHEPREFIX`` filled by an untimed warm-up run, as an installed copy has);
* the AideMemo suite against ``aidememo-ref serve`` provisioned by its bootstrap command, right
  after the embedded run it is compared with (same checks, same seed, cached bytecode), with the
  identities it provisioned (the served ledger's token bindings) and what their bootstraps cost
  (the CPU of the suite process's children); then the same with ``--fresh-identities``, every
  check in a fresh project as before checks declared their isolation (``--skip-fresh`` leaves it out).

CPU time (user + system of the run and the processes it started) is printed beside wall time:
on a machine other work loads, it is the steadier figure.

    python bench/suite.py [--repeat 5] [--skip-served] [--served-only] [--skip-fresh] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.installed import PROFILES  # noqa: E402

from _conditions import Window, closing, opening  # noqa: E402

BOOTSTRAP = ("bootstrap --database {database} --tenant-id {tenant} --project-id {project} --actor-id {actor} "
             "--token-file {token_file} --role {role}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, CPU s, the finished process) of one fresh process and its children."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    return time.perf_counter() - started, _children_cpu() - cpu, done


def _ok(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    wall, cpu, done = _timed(argv, env)
    if done.returncode != 0:
        raise SystemExit(f"bench command failed (exit {done.returncode}): {' '.join(argv[:6])} ...\n"
                         f"{(done.stdout + done.stderr)[-1500:]}")
    return wall, cpu


def _env(cached: bool, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "HERMES_"))}
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def _script(name: str) -> str:
    """The console script beside this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def _suite(env: dict[str, str], report: Path, *flags: str) -> tuple[float, float]:
    return _ok([sys.executable, "-m", "conformance.cli", "run", "--seed", "1", "--report-dir", str(report), *flags],
               env)


def _startups(env: dict[str, str], scratch: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall ms, CPU ms) of each start-up, interleaved so noise hits all alike."""
    ref = _script("aidememo-ref")
    database = scratch / "startup.sqlite"
    token = scratch / "startup.token"
    token.write_text("tok-startup-bench\n")
    token.chmod(0o600)
    bootstrap = [ref, "bootstrap", "--database", str(database), "--tenant-id", "t", "--project-id", "p",
                 "--actor-id", "a", "--token-file", str(token)]
    _ok(bootstrap, env)  # creates the file: every later bootstrap meets an existing ledger, as in a run
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "aidememo-ref (local: session list)": [ref, "--store", str(scratch / "local.sqlite"), "session", "list"],
        "aidememo-ref bootstrap": bootstrap,
    }
    for argv in commands.values():  # warm-up: fills the bytecode cache when there is one
        _ok(argv, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            wall, cpu = _ok(argv, env)
            samples[name].append((wall * 1000, cpu * 1000))
    return {name: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s)) for name, s in samples.items()}


# Runs the suite in this process and writes its own CPU and its children's (without -n: the
# bootstraps it ran) to the file named first, so the served run's CPU splits into the two.
_SPLIT = """import resource, sys
from conformance.cli import main
code = main(sys.argv[2:])
own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as handle:
    handle.write(f"{own.ru_utime + own.ru_stime} {children.ru_utime + children.ru_stime}")
sys.exit(code)
"""


def _served(env: dict[str, str], scratch: Path, workers: str | None, *flags: str
            ) -> tuple[float, float, int, tuple[float, float]]:
    """(wall s, CPU s, identities provisioned, (the suite process's own CPU s, its children's))
    of the suite against ``aidememo-ref serve``, provisioned by its bootstrap command."""
    from refkit.process import ReferenceProcess

    run = scratch / f"served{'-'.join(flags)}"
    run.mkdir()
    database = run / "served.sqlite"
    template = f"{_script('aidememo-ref')} {BOOTSTRAP.replace('{database}', str(database))}"
    split = run / "cpu-split"
    with ReferenceProcess.start(database, test_clock=True) as server:
        wall, cpu = _ok([sys.executable, "-c", _SPLIT, str(split), "run", "--seed", "1", "--report-dir",
                         str(run / "report"), "--url", server.url, "--provision-command", template, *flags,
                         *(["-n", workers] if workers else [])], env)
    with sqlite3.connect(database) as conn:
        identities = int(conn.execute("SELECT count(*) FROM token_bindings").fetchone()[0])
    own, children = (float(word) for word in split.read_text().split())
    return wall, cpu, identities, (own, children)


def _served_lines(label: str, run: tuple[float, float, int, tuple[float, float]], embedded: tuple[float, float],
                  workers: str | None) -> list[str]:
    wall, cpu, identities, (own, children) = run
    split = (f"bootstraps' CPU {children:.2f} s (the suite process's children), the suite's own {own:.2f} s"
             if not workers else "CPU not split under -n (the workers are children too)")
    return [_line(label, wall, cpu, embedded),
            f"  {identities} identities provisioned, one bootstrap each; {split}"]


def _startup_line(env: dict[str, str], runs: int = 10) -> str:
    """What one bootstrap pays before it runs a line of the kit: this interpreter's start-up, its
    site and .pth files included (a hook an environment adds there is paid once per identity), beside
    the same start without site. It explains most of a served run's gap between environments."""
    import resource
    import subprocess
    import sys

    def cpu_ms(*flags: str) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(runs):
            subprocess.run([sys.executable, *flags, "-c", "pass"], env=env, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000 / runs

    return (f"  interpreter start-up per process: {cpu_ms():.0f} ms CPU with site and .pth files, "
            f"{cpu_ms('-S'):.0f} ms without (python -c pass, mean of {runs})")


def _line(label: str, wall: float, cpu: float, base: tuple[float, float] | None = None) -> str:
    ratio = f"   {wall / base[0]:.1f}x wall, {cpu / base[1]:.1f}x CPU of the embedded run" if base else ""
    return f"{label:<68} {wall:7.2f} s wall {cpu:7.2f} s CPU{ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="start-up samples of each command (median)")
    parser.add_argument("--skip-served", action="store_true", help="leave out the served-by-command run")
    parser.add_argument("--workers", default=None, help="run the two AideMemo runs compared with -n N")
    parser.add_argument("--served-only", action="store_true",
                        help="only the embedded baseline and the served runs compared with it")
    parser.add_argument("--skip-fresh", action="store_true",
                        help="leave out the served run with --fresh-identities (identities before sharing)")
    options = parser.parse_args()
    if options.repeat < 1 or (options.workers is not None and not options.workers.isdigit()):
        print("bench/suite.py: --repeat must be >= 1 and --workers a number", file=sys.stderr)
        raise SystemExit(2)
    opening("bench/suite.py (each timed run sets its own bytecode caching, printed with it)")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        cached, uncached = _env(True, scratch), _env(False, scratch)
        _suite(cached, scratch / "warm")  # untimed: fills the bytecode cache
        if not options.served_only:
            _startup_table(cached, scratch, options.repeat)
            _profile_tables(cached, uncached, scratch)
        if not options.skip_served:
            _served_part(cached, scratch, options.workers, fresh=not options.skip_fresh)
    closing()


def _thread_server(repeat: int) -> None:
    """Median start, one request and stop of the embedded reference's socket server (what every
    embedded run and most tests do), against the same with uvicorn's own ``Server`` class."""
    import threading

    import httpx
    import uvicorn

    from aidememo_ref import ReferenceLedger
    from refkit import serving

    def cycle(ledger: ReferenceLedger, prompt: bool) -> float:
        started = time.perf_counter()
        if prompt:
            with serving.serve_in_thread(ledger) as url, httpx.Client() as client:
                client.get(f"{url}/health")
            return time.perf_counter() - started
        sock = serving.bind_socket("127.0.0.1", 0)
        server = uvicorn.Server(uvicorn.Config(ledger.asgi, log_level="warning", lifespan="off", access_log=False))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.005)
        with httpx.Client() as client:
            client.get(f"http://127.0.0.1:{sock.getsockname()[1]}/health")
        server.should_exit = True
        thread.join()
        sock.close()
        return time.perf_counter() - started

    window = Window()
    with tempfile.TemporaryDirectory() as tmp:
        ledger = ReferenceLedger(str(Path(tmp) / "ledger.sqlite"))
        try:
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(max(repeat, 5)):
                for prompt in (False, True):
                    times[prompt].append(cycle(ledger, prompt) * 1000)
        finally:
            ledger.close()
    stock, ours = statistics.median(times[False]), statistics.median(times[True])
    print(window.mark(f"  socket server in a thread, start + /health + stop: {ours:6.1f} ms; with uvicorn's own "
                      f"Server class {stock:6.1f} ms ({ours / stock:.2f}x)"))


def _startup_table(cached: dict[str, str], scratch: Path, repeat: int) -> None:
    window = Window()
    startups = _startups(cached, scratch, repeat)
    bare = startups["python -c pass"]
    print(f"start-up (median of {repeat}, bytecode cached):")
    for name, (wall, cpu) in startups.items():
        print(window.mark(f"  {name:<40} {wall:6.1f} ms wall {cpu:6.1f} ms CPU   {wall / bare[0]:.1f}x / "
                          f"{cpu / bare[1]:.1f}x python -c pass"))
    local, boot = startups["aidememo-ref (local: session list)"], startups["aidememo-ref bootstrap"]
    print(window.mark(f"  bootstrap against the local command: {boot[0] / local[0]:.2f}x wall, "
                      f"{boot[1] / local[1]:.2f}x CPU"))
    _thread_server(repeat)


def _profile_tables(cached: dict[str, str], uncached: dict[str, str], scratch: Path) -> None:
    for name in PROFILES:
        if name != "aidememo":
            _suite(cached, scratch / f"warm-{name}", "--profile", name)
    for label, env in (("bytecode not cached", uncached), ("bytecode cached", cached)):
        window = Window()
        runs = {name: _suite(env, scratch / f"{name}-{label}", "--profile", name) for name in PROFILES}
        print(window.mark(_line(f"embedded, AideMemo profile ({label})", *runs["aidememo"])))
        for name, (wall, cpu) in runs.items():
            if name == "aidememo":
                continue
            print(window.mark(_line(f"  embedded, {name} profile ({label})", wall, cpu)))
            if name == "aidememo-local":  # the kit's CLI forked per command, against started fresh
                fresh_window = Window()
                fresh = _suite(env, scratch / f"local-fresh-{label}", "--profile", name, "--cli",
                               f"{sys.executable} -m aidememo_ref")
                print(fresh_window.mark(_line("    the same, each command a fresh interpreter (--cli)", *fresh,
                                              (wall, cpu)).replace("of the embedded run", "of the forked run")))
        print(window.mark(_line(f"embedded, all {len(PROFILES)} profiles in turn ({label})",
                                sum(w for w, _ in runs.values()), sum(c for _, c in runs.values()))))


def _wire_cost(scratch: Path, requests: int = 300) -> None:
    """What one served request costs the suite's process: the kit's ``Wire`` (a fresh connection and
    a deadline per request) asking a served reference ``GET /health``, CPU and wall per request."""
    from conformance.http import Wire
    from refkit.process import ReferenceProcess

    window = Window()
    with ReferenceProcess.start(scratch / "wire.sqlite") as server:
        wire = Wire(server.url, timeout_s=10, max_body_bytes=1 << 20)
        for _ in range(20):  # warm-up
            wire.request(None, "GET", "/health")
        own = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        for _ in range(requests):
            wire.request(None, "GET", "/health")
        wall = time.perf_counter() - began
        done = resource.getrusage(resource.RUSAGE_SELF)
        wire.close()
    cpu = done.ru_utime + done.ru_stime - own.ru_utime - own.ru_stime
    print(window.mark(f"  the suite's wire, one served GET /health: {cpu / requests * 1e6:6.0f} us CPU, "
                      f"{wall / requests * 1e3:6.2f} ms wall per request (the client's side)"))


def _served_part(cached: dict[str, str], scratch: Path, workers: str | None, *, fresh: bool) -> None:
    """The embedded run, then right after it the served one compared with it (and the one before sharing)."""
    _wire_cost(scratch)
    shown = f" -n {workers}" if workers else ""
    window = Window()
    embedded = _suite(cached, scratch / "embedded-baseline", *(["-n", workers] if workers else []))
    shared = _served(cached, scratch, workers)
    print(window.mark(_line(f"embedded, AideMemo profile{shown} (baseline, bytecode cached)", *embedded)))
    for line in _served_lines(f"served by command, AideMemo profile{shown} (bytecode cached)", shared, embedded,
                              workers):
        print(window.mark(line))
    print(window.mark(_startup_line(cached)))
    if fresh:  # before sharing: a fresh project for every check, as every check had before it declared its isolation
        window = Window()
        for line in _served_lines(f"  the same with --fresh-identities (before sharing){shown}",
                                  _served(cached, scratch, workers, "--fresh-identities"), embedded, workers):
            print(window.mark(line))


if __name__ == "__main__":
    main()
