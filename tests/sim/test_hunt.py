"""Hunts on Dask (issue 22): a real ``dask scheduler`` and two ``dask worker`` processes on
loopback, one killed while it runs a shard; the hunt still reports the planted race once, and
the replay command it printed reproduces the race on one machine, twice, with the same answer."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from simulations.hunt import Display, HuntResult, Progress, run_hunt
from simulations.shards import ShardSpec, run_shard, shard_seed

Popen = subprocess.Popen[bytes]
BIN = Path(sys.executable).parent  # where the kit's own scripts are installed
MUTANTS = Path(__file__).with_name("mutants.py")
# Shards 0, 1 and 2 of root seed 2 each find split_decide as two accepts both answered 200 (one
# finding; shard 3 finds it as two sends, another); --batches makes each shard exact.
SEED, BATCHES, SHARDS = 2, 300, 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(*words: str, log: Path) -> Popen:
    # The `dask` command itself, run by this interpreter: its console script need not sit beside
    # sys.executable (a venv over the system's packages puts it elsewhere). A session of its own,
    # so the whole process group (a worker's nanny and its child) can be killed.
    return subprocess.Popen([sys.executable, "-m", "dask", *words], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _group_gone(group: int, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _kill(process: subprocess.Popen[Any]) -> None:
    """Kill ``process`` and its group (a worker's nanny and the worker it spawned), and wait until
    the group is gone."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)
    try:
        os.killpg(process.pid, signal.SIGKILL)  # what the group leader left behind
    except ProcessLookupError:
        return
    if not _group_gone(process.pid):
        raise AssertionError(f"process group {process.pid} outlived SIGKILL")


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextmanager
def _cluster(root: Path, workers: int = 2) -> Iterator[tuple[str, Popen, list[Popen]]]:
    """A scheduler and single-threaded workers on loopback: (address, scheduler, workers). Every
    process is killed on the way out, whatever happened."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = _start("scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                       "--no-dashboard", log=root / "scheduler.log")
    processes = [scheduler]
    try:
        started = [_start("worker", address, "--nthreads", "1", "--no-dashboard", "--name", f"w{n}",
                          log=root / f"worker{n}.log") for n in range(workers)]
        processes += started
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(workers, timeout=60)
        yield address, scheduler, started
    finally:
        for process in processes:
            _kill(process)


def _sh(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_shard_seeds_are_derived_apart_and_a_shard_is_a_pure_function() -> None:
    seeds = {shard_seed(SEED, index) for index in range(64)}
    assert len(seeds) == 64 and shard_seed(SEED, 0) != shard_seed(SEED + 1, 0)
    spec = ShardSpec(root_seed=SEED, index=1, actors=3, budget_s=60, max_batches=BATCHES,
                     factory=f"{MUTANTS}:split_decide")
    first, again = run_shard(spec), run_shard(spec)  # a re-run elsewhere, after a lost worker
    assert first.found is not None and again.found is not None
    # The same answers in the same order (their clock readings aside) and the same shrunk case.
    assert [(op.client, op.input, op.output) for op in first.found.history] == \
        [(op.client, op.input, op.output) for op in again.found.history]
    assert first.found.plan == again.found.plan and first.found.decisions == again.found.decisions


def test_a_shard_stops_its_workers_profiler_where_that_profiler_can_deadlock_the_process() -> None:
    """CPython 3.11's sys._current_frames, which a Dask worker's profiler calls every 10 ms, can
    deadlock a process running many threads (python/cpython#106883): a hunt on `dask worker`
    processes hung for good. On 3.11 a shard stops it; elsewhere it is left alone."""
    from distributed import Client, LocalCluster

    def profiling(dask_worker: Any) -> bool:
        return bool(dask_worker.periodic_callbacks["profile"].is_running())
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        before = list(client.run(profiling).values())
        spec = ShardSpec(root_seed=SEED, index=0, actors=3, budget_s=60, max_batches=2, factory=None)
        outcome = client.submit(run_shard, spec, pure=False).result(timeout=120)
        after = list(client.run(profiling).values())
    assert outcome.batches == 2
    assert before == [True]
    assert after == [sys.version_info[:2] != (3, 11)]


def test_a_hunt_on_a_cluster_survives_a_killed_worker(tmp_path: Path) -> None:
    """Three shards on two workers; the worker named w1 is killed while it runs one of them."""
    with _cluster(tmp_path) as (address, _scheduler, workers):
        from distributed import Client

        command = (f"aidememo-sim run --seed {SEED} --batches {BATCHES} --budget 120 --workers {SHARDS} "
                   f"--scheduler {address} --ledger {MUTANTS}:split_decide --out {tmp_path / 'found'}")
        hunt = subprocess.Popen(["sh", "-c", command], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            killed = None
            with Client(address, timeout="30s") as client:
                deadline = time.monotonic() + 240
                while killed is None and time.monotonic() < deadline and hunt.poll() is None:
                    names = {addr: info.get("name") for addr, info in client.scheduler_info()["workers"].items()}
                    for addr, keys in client.processing().items():
                        if keys and names.get(addr) == "w1":
                            _kill(workers[1])  # mid-shard: a shard is on it right now
                            killed = keys[0]
                            break
                    time.sleep(0.02)
            output, _ = hunt.communicate(timeout=600)
        finally:
            _kill(hunt)
        assert killed is not None, output
    assert hunt.returncode == 1, output
    summary = re.search(r"hunt: (\d+) of (\d+) shards run, (\d+) lost, .* (\d+) distinct findings", output)
    assert summary is not None, output
    # The killed worker's shard ran again on the other one: nothing lost, the race reported once.
    assert summary.groups() == (str(SHARDS), str(SHARDS), "0", "1"), output
    assert re.search(r"^finding 1: linearizability, found by shards 0, 1, 2 ", output, re.MULTILINE), output
    replays = re.findall(r"^  reproduce with: (aidememo-sim replay .+)$", output, re.MULTILINE)
    assert len(replays) == 1, output
    found = tmp_path / "found"
    assert len(list(found.glob("race-seed-*[0-9].json"))) == 1
    # Each shard wrote its own history file (the killed one's shard again, from the start).
    assert sorted(found.glob("run-seed-*.jsonl")) == sorted(found / f"run-seed-{shard_seed(SEED, i)}.jsonl"
                                                            for i in range(SHARDS))
    # The cluster is gone: the printed command reproduces the race on this machine alone, twice.
    answers = [_sh(replays[0] + " --times 20", tmp_path) for _ in (1, 2)]
    for answer in answers:
        assert answer.returncode == 1, answer.stdout + answer.stderr
        assert "reproduced 20/20" in answer.stdout
    assert answers[0].stdout == answers[1].stdout


def test_a_lost_scheduler_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    with _cluster(tmp_path, workers=1) as (address, scheduler, _workers):
        hunt = subprocess.Popen(["sh", "-c", f"aidememo-sim run --seed 3 --budget 60 --workers 2 --scheduler {address}"],
                                cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            assert hunt.stdout is not None
            for line in hunt.stdout:
                if "running" in line:  # the shards are on the cluster
                    break
            _kill(scheduler)
            _out, err = hunt.communicate(timeout=120)
        finally:
            _kill(hunt)
    assert hunt.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"aidememo-sim: lost the Dask scheduler at {address}"), err


def test_an_unreachable_scheduler_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    answer = _sh(f"aidememo-sim run --seed 1 --batches 2 --scheduler tcp://127.0.0.1:{_free_port()}", tmp_path)
    assert answer.returncode != 0
    assert answer.stdout.count("\n") <= 3 and "Traceback" not in answer.stderr
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], answer.stderr


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_ctrl_c_stops_a_hunt_cleanly_with_the_command_that_runs_it_again(tmp_path: Path) -> None:
    hunt = subprocess.Popen([str(BIN / "aidememo-sim"), "run", "--seed", "11", "--budget", "120", "--workers", "2"],
                            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert hunt.stdout is not None
        seen = []
        for line in hunt.stdout:
            seen.append(line)
            if "running" in line:
                break
        hunt.send_signal(signal.SIGINT)
        out, err = hunt.communicate(timeout=120)
        # The local cluster's processes went with the hunt: nothing of its process group is left.
        assert _group_gone(hunt.pid), "a process of the interrupted hunt's local cluster outlived it"
    finally:
        _kill(hunt)
    assert hunt.returncode == 130, "".join(seen) + out + err
    assert "Traceback" not in err and "Traceback" not in out, err
    assert re.search(r"^hunt: 0 of 2 shards run", out, re.MULTILINE), out
    assert "interrupted; run the hunt again with: aidememo-sim run --seed 11 --actors 3 --budget 120 --workers 2" in out


@pytest.mark.slow
def test_the_printed_hunt_and_shard_commands_give_the_same_answer_twice(tmp_path: Path) -> None:
    command = f"aidememo-sim run --seed {SEED} --batches {BATCHES} --workers 2 --ledger {MUTANTS}:split_decide"
    first = _sh(command, tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    again = re.search(r"^replay this hunt with: (.*)$", first.stdout, re.MULTILINE)
    shard = re.search(r"^  the shard alone: (.*)$", first.stdout, re.MULTILINE)
    assert again is not None and shard is not None, first.stdout

    def findings(text: str) -> list[str]:
        return re.findall(r"^(finding \d+: .*|  reproduce with: .*)$", text, re.MULTILINE)

    hunts = [_sh(again.group(1), tmp_path) for _ in (1, 2)]
    assert [h.returncode for h in hunts] == [1, 1]
    assert findings(hunts[0].stdout) == findings(hunts[1].stdout) == findings(first.stdout)
    shards = [_sh(shard.group(1), tmp_path) for _ in (1, 2)]
    assert [s.returncode for s in shards] == [1, 1]
    shrunk = [re.search(r"^shrunk to .*$", s.stdout, re.MULTILINE) for s in shards]
    assert shrunk[0] is not None and shrunk[1] is not None
    assert shrunk[0].group(0) == shrunk[1].group(0)


@pytest.mark.slow
def test_an_xmemo_hunt_reports_its_planted_race_once_and_the_replay_reproduces_it(tmp_path: Path) -> None:
    races = Path(__file__).parent.parent / "xmemo" / "races.py"
    hunt = _sh(f"aidememo-sim xmemo run --seed 3 --batches 6 --workers 2 --ledger {races}:check_then_act --out found",
               tmp_path)
    assert hunt.returncode == 1, hunt.stdout + hunt.stderr
    assert re.search(r"^hunt: 2 of 2 shards run, 0 lost, .* 1 distinct findings", hunt.stdout, re.MULTILINE)
    assert "finding 1: XM-IDEM-1" in hunt.stdout
    replays = re.findall(r"^  reproduce with: (aidememo-sim replay .+)$", hunt.stdout, re.MULTILINE)
    assert len(replays) == 1
    answers = [_sh(replays[0] + " --times 2", tmp_path) for _ in (1, 2)]
    assert [a.returncode for a in answers] == [1, 1], answers[0].stdout + answers[0].stderr
    assert answers[0].stdout == answers[1].stdout and "reproduced 2/2" in answers[0].stdout


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_live_line_on_a_terminal_and_plain_lines_elsewhere() -> None:
    terminal, log = _Terminal(), io.StringIO()
    for stream in (terminal, log):
        display = Display(stream)
        display.status("  2.0 s: 0 shards done, 2 running")
        display.status("  4.0 s: 1 shards done, 1 running")
        display.line("shard 1 found a linearizability violation")
        display.status("  6.0 s: 2 shards done, 0 running")
        display.line("hunt: 2 of 2 shards run")
    assert terminal.getvalue() == ("\r\x1b[K2.0 s: 0 shards done, 2 running\r\x1b[K4.0 s: 1 shards done, 1 running"
                                   "\r\x1b[Kshard 1 found a linearizability violation\n"
                                   "\r\x1b[K6.0 s: 2 shards done, 0 running\r\x1b[Khunt: 2 of 2 shards run\n")
    assert log.getvalue().splitlines() == ["  2.0 s: 0 shards done, 2 running", "  4.0 s: 1 shards done, 1 running",
                                           "shard 1 found a linearizability violation",
                                           "  6.0 s: 2 shards done, 0 running", "hunt: 2 of 2 shards run"]


STATUS = re.compile(r"^ +[\d.]+ s: (?P<done>\d+) shards done, (?P<running>\d+) running, (?P<queued>\d+) queued, "
                    r"(?P<lost>\d+) lost, (?P<ops>\d+) operations, \d+ operations/s, (?P<found>\d+) findings so far "
                    r"\((?P<distinct>\d+) distinct\)$")


def test_progress_counts_the_running_shards_and_a_log_gets_plain_lines(tmp_path: Path) -> None:
    log = io.StringIO()  # not a terminal
    specs = [ShardSpec(root_seed=7, index=i, actors=3, budget_s=8, max_batches=None, factory=None, out=str(tmp_path))
             for i in range(2)]
    hunt = run_hunt(specs, workers=2, scheduler=None, out=tmp_path, display=Display(log, every_s=0.5))
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text, text
    assert re.search(r"^dask dashboard: http://\S+$", text, re.MULTILINE), text  # the local cluster serves one
    status = [m for m in map(STATUS.match, text.splitlines()) if m]
    running = [int(m["ops"]) for m in status if m["done"] == "0" and m["running"] == "2"]
    # Before any shard is done the line already counts the running shards' operations, and they grow.
    counted = [n for n in running if n > 0]  # a shard publishes 0 as it starts
    assert len(counted) >= 3 and counted[0] < counted[-1], text
    assert running == sorted(running), text
    assert len(hunt.done) == 2 and hunt.operations >= running[-1]


def test_the_status_line_counts_what_running_shards_published() -> None:
    hunt = HuntResult(shards=3)
    progress = Progress()
    progress.heard((1.0, {"index": 0, "operations": 40, "found": None}))
    progress.heard((1.5, {"index": 1, "operations": 10, "found": "linearizability"}))
    progress.heard((2.0, {"index": 0, "operations": 90, "found": None}))  # the latest counts
    progress.heard((2.0, "not a shard's message"))
    line = progress.line(hunt, 2.0)
    assert STATUS.match(line) and "0 shards done, 2 running, 1 queued, 0 lost, 100 operations" in line
    assert "1 findings so far (0 distinct)" in line
    progress.heard((3.0, {"index": 1, "operations": 30, "found": "linearizability"}))
    assert "120 operations, 20 operations/s" in progress.line(hunt, 3.0)


@pytest.mark.slow
def test_shards_against_one_server_each_get_a_project_and_no_token_shows(tmp_path: Path) -> None:
    from .served import served_file

    secret = re.compile(r"sim-[0-9a-f]{32}|\b[0-9a-f]{32}\b")  # the tokens the simulator provisions
    with served_file(tmp_path / "ref.sqlite", tmp_path / "target.toml", bug=True):
        hunt = _sh("aidememo-sim run --seed 4 --actors 3 --budget 120 --batches 20 --config target.toml "
                   "--workers 2 --out out", tmp_path)
        assert hunt.returncode == 1, hunt.stdout[-3000:] + hunt.stderr[-2000:]
        assert "provisioned 2 projects" in hunt.stdout
        # One planted bug, one finding, whichever shards found it.
        assert re.search(r"^hunt: 2 of 2 shards run, 0 lost, .* 1 distinct findings", hunt.stdout, re.MULTILINE), \
            hunt.stdout
        assert len(list((tmp_path / "out").glob("race-seed-*[0-9].json"))) == 1
        printed = re.findall(r"^  (?:reproduce with|check what was seen \(the same verdict every time\)): "
                             r"(aidememo-sim \S+ \S+(?: --\S+ \S+)*)", hunt.stdout, re.MULTILINE)
        assert printed, hunt.stdout
        answers = [_sh(command, tmp_path) for command in printed for _ in (1, 2)]
        for answer in answers:  # each printed command, run twice: the violation both times
            assert answer.returncode == 1, answer.stdout[-2000:] + answer.stderr
    texts = [hunt.stdout, hunt.stderr, *(a.stdout + a.stderr for a in answers),
             *(path.read_text() for path in (tmp_path / "out").iterdir() if path.is_file())]
    assert not any(secret.search(text) for text in texts)


def test_shards_sharing_a_correct_servers_clock_find_nothing(tmp_path: Path) -> None:
    # Each shard moves the one server's test clock; the others' leases expire under them. A
    # correct server must not be accused (it was, when shards judged by their planned time).
    from .served import served_file

    with served_file(tmp_path / "ref.sqlite", tmp_path / "target.toml"):
        hunt = _sh("aidememo-sim run --seed 4 --actors 3 --budget 60 --batches 120 --config target.toml "
                   "--workers 2 --out out", tmp_path)
    assert hunt.returncode == 0, hunt.stdout[-3000:] + hunt.stderr[-2000:]
    assert re.search(r"^hunt: 2 of 2 shards run, 0 lost, .* 0 distinct findings", hunt.stdout, re.MULTILINE)


def test_shards_by_url_with_given_tokens_are_refused_in_one_line(tmp_path: Path) -> None:
    answer = _sh("aidememo-sim run --workers 2 --url http://127.0.0.1:9 --project p "
                 "--token agent-a=x --token agent-b=y", tmp_path)
    assert answer.returncode == 2 and "Traceback" not in answer.stderr
    assert len(answer.stderr.strip().splitlines()) == 1 and "--config" in answer.stderr
