"""Issue 14: lease expiry scored against servers without the test clock, by one real wait.

The reference grants short leases here (``mutants.SHORT_LEASE_MS`` in process, ``serve
--claim-lease-ms`` as a server), since the suite reads the lease length from the server's
answers and never assumes 120 s. The wait itself is tested with an injected clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from refkit.process import ReferenceProcess
from conformance.errors import ConfigError, Untestable
from conformance.installed import resolve_run
from conformance.profiles.aidememo.leases import Arranged, Lease, LeaseWait, margin_after, margin_before
from conformance.profiles.aidememo.settings import REAL_TIME_LEASES, configure
from conformance.schedule import LATE_MARKER, LateScheduling
from conformance.settings import SettingsInput
from tests.suite.mutants import REAL_TIME_MUTANTS, SHORT_LEASE_MS
from tests.targetfile import token_entry, write_target

HERE = Path(__file__).parent
SEED = "20261201"
EXPIRY = ["AM-HL-ACC-3", "AM-HL-HB-3", "AM-HL-RET-5"]
EXPIRY_ARGS = [arg for rid in EXPIRY for arg in ("--requirement", rid)]
EXPIRY_CHECKS = {"test_expired_claim_cannot_heartbeat", "test_lease_is_live_until_its_last_moments",
                 "test_expired_claim_cannot_be_revived_by_the_same_claim", "test_a_new_claim_takes_over_an_expired_lease",
                 "test_return_after_expiry_conflicts", "test_old_claim_is_fenced_after_a_takeover",
                 "test_a_completed_handoff_holds_no_lease"}


def _interruptible() -> None:
    # A shell without job control starts background jobs with SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: give the run the Ctrl-C a terminal would deliver.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def _run(report: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--seed", SEED, "--report-dir", str(report),
                           *args], capture_output=True, text=True, timeout=300, env=_env())
    results = report / "results.json"
    assert results.exists(), f"no results.json (exit {done.returncode})\n{done.stderr[-2000:]}"
    records = json.loads(results.read_text())["records"]
    return done, {r["nodeid"].rsplit("::", 1)[-1]: r["verdict"] for r in records}


def _expiry(verdicts: dict[str, str]) -> dict[str, str]:
    return {name: verdict for name, verdict in verdicts.items() if name in EXPIRY_CHECKS}


def test_without_the_test_clock_expiry_is_scored_by_one_real_wait_shared_under_xdist(tmp_path):
    factory = ["--embedded-factory", "mutants:real_time_reference"]
    _, verdicts = _run(tmp_path / "virtual", *factory, *EXPIRY_ARGS)
    assert verdicts == dict.fromkeys(EXPIRY_CHECKS, "SKIP"), verdicts
    done, verdicts = _run(tmp_path / "real", *factory, "--real-time-leases", "-n", "2", "--requirement", "AM-HL-")
    assert _expiry(verdicts) == dict.fromkeys(EXPIRY_CHECKS, "PASS"), (verdicts, done.stdout[-1500:])
    assert len(verdicts) > len(EXPIRY_CHECKS) + 20, "the other checks ran too"
    # A short lease departs from the 120 s a renewal must grant (AM-HL-HB-1); nothing else fails. The
    # expiry millisecond is probed on the virtual clock only (AM-HL-HB-4).
    assert {name: v for name, v in verdicts.items() if v != "PASS"} == {
        "test_heartbeat_renews_the_lease_only": "FAIL", "test_a_lease_is_stale_at_exactly_its_expiry": "SKIP"}
    # All seven leases set up ahead on one worker (gw0, which runs them last), one wait, and how it ended.
    starts = [line for line in done.stderr.splitlines() if "leases set up ahead: " in line]
    assert len(starts) == 1 and f"7 lease(s) of up to {SHORT_LEASE_MS} ms (read from the server)" in starts[0], (
        done.stderr)
    assert starts[0].startswith("aidememo [gw0]: ") and done.stderr.count("lease wait over after") == 1


def test_forced_real_time_gives_the_verdicts_of_the_test_clock(tmp_path):
    args = ["--embedded-factory", "mutants:real_time_reference_with_clock", *EXPIRY_ARGS]
    _, virtual = _run(tmp_path / "virtual", *args)
    done, real = _run(tmp_path / "real", *args, "--real-time-leases")
    assert virtual == dict.fromkeys(EXPIRY_CHECKS, "PASS")
    assert real == virtual
    assert "leases set up ahead: 7 lease(s)" in done.stderr, "the wait was forced although the test clock is served"


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> dict[str, list[dict]]:
    base = tmp_path_factory.mktemp("real-time-mutants")

    def run(name: str) -> list[dict]:
        _run(base / name, "--embedded-factory", f"mutants:{name}", "--real-time-leases", *EXPIRY_ARGS)
        return json.loads((base / name / "results.json").read_text())["records"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(REAL_TIME_MUTANTS, pool.map(run, REAL_TIME_MUTANTS)))


@pytest.mark.parametrize("name", sorted(REAL_TIME_MUTANTS))
def test_each_broken_lease_is_killed_by_its_requirements_in_real_time(killed, name):
    records = killed[name]
    failed = {r["requirement"] for r in records if r["verdict"] == "FAIL"}
    assert set(REAL_TIME_MUTANTS[name][1]) <= failed, [(r["nodeid"], r["verdict"], r["reason"][:120]) for r in records]
    assert failed <= set(EXPIRY), "a real-time mutant must fail by the lease requirements only"


def test_a_served_reference_without_the_test_clock_passes_with_fixed_tokens_in_one_project(tmp_path):
    database = tmp_path / "ledger.sqlite"
    with ReferenceProcess.start(database, extra_args=["--claim-lease-ms", str(SHORT_LEASE_MS)]) as server:
        url = server.url
        tokens = []
        for actor in ("w1", "w2"):
            token_file = tmp_path / f"{actor}.token"
            token_file.write_text(f"fixed-{actor}-token-0123456789\n")
            token_file.chmod(0o600)
            subprocess.run(["aidememo-ref", "bootstrap", "--database", str(database), "--tenant-id", "acme",
                            "--project-id", "shared", "--actor-id", actor, "--token-file", str(token_file),
                            "--role", "writer"], check=True, capture_output=True, timeout=60)
            tokens.append(token_entry("shared", actor, token_file=token_file.name))
        write_target(tmp_path / "target.toml", url, tokens, real_time_leases=True)
        done, verdicts = _run(tmp_path / "fixed", "--config", str(tmp_path / "target.toml"), *EXPIRY_ARGS)
        assert verdicts == dict.fromkeys(EXPIRY_CHECKS, "PASS"), (verdicts, done.stdout[-1500:])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_ctrl_c_during_the_wait_reads_untestable_and_stops_cleanly(tmp_path, workers):
    # A long lease (the reference's own 120 s, without the test clock), interrupted once the wait began.
    # Under xdist the interrupted worker never reports: the controller lists its checks as never run.
    report = tmp_path / "report"
    process = subprocess.Popen([sys.executable, "-m", "conformance.cli", "run", "--seed", SEED, "--report-dir",
                                str(report), "--embedded-factory", "mutants:no_test_clock", "--real-time-leases",
                                *EXPIRY_ARGS, *workers], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=_env(), start_new_session=True,
                               preexec_fn=_interruptible)
    assert process.stderr is not None
    for line in process.stderr:
        if "lease wait: " in line:
            break
    os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C in a terminal: to the run and its xdist workers
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, (out[-1500:], err[-1500:])
    records = json.loads((report / "results.json").read_text())["records"]
    expiry = {r["nodeid"].rsplit("::", 1)[-1]: r for r in records if r["nodeid"].rsplit("::", 1)[-1] in EXPIRY_CHECKS}
    assert expiry.keys() == EXPIRY_CHECKS and {r["verdict"] for r in expiry.values()} == {"UNTESTABLE"}, expiry
    reasons = {r["reason"].split(" ", 1)[0] for r in expiry.values()}
    assert reasons <= {"interrupted", "collected"}, reasons
    if not workers:
        assert any("interrupted (Ctrl-C)" in r["reason"] for r in expiry.values())
    assert "RESULT: some checks could not reach their point (UNTESTABLE or UNKNOWN)" in out


# -- the wait itself, on an injected clock ---------------------------------------------------------
class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.interrupt_after: int | None = None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if self.interrupt_after is not None and len(self.slept) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.slept.append(seconds)
        self.now += seconds


class FakeWorld:
    def __init__(self, clock: FakeTime, lease_ms: int, *, before: bool = False, fails: BaseException | None = None):
        self.clock, self.lease_ms, self.before, self.fails = clock, lease_ms, before, fails
        self.steps: list[float] = []

    def arrange(self, world: FakeWorld) -> Arranged:
        if self.fails is not None:
            raise self.fails
        lease = Lease(lease_ms=self.lease_ms, sent_at=self.clock.now, answered_at=self.clock.now + 0.01)
        step = (lambda: self.steps.append(self.clock.now) or "heartbeat receipt") if self.before else None
        return Arranged(value=self, lease=lease, before_expiry=step)


def _wait(clock: FakeTime, worlds: list[FakeWorld]) -> tuple[LeaseWait, list[str], list[str]]:
    wait, lines, stops = LeaseWait(sleep=clock.sleep, clock=clock.clock), [], []
    wait.run(worlds, lambda world: world.arrange, lines.append, stops.append)
    return wait, lines, stops


def test_one_wait_until_the_longest_lease_has_surely_expired():
    clock = FakeTime()
    worlds = [FakeWorld(clock, 120_000), FakeWorld(clock, 60_000), FakeWorld(clock, 120_000, before=True)]
    wait, lines, stops = _wait(clock, worlds)
    assert clock.now == pytest.approx(100.01 + 120 + margin_after(120)), "slept past the longest expiry, once"
    assert sum(clock.slept) == pytest.approx(120.01 + margin_after(120))
    assert worlds[2].steps == [pytest.approx(100 + 120 - margin_before(120))], "the live step runs 5 s before expiry"
    assert wait.result(worlds[2]).before_answer() == "heartbeat receipt"
    assert [wait.result(w).value for w in worlds] == worlds and not stops
    assert lines[0].startswith("lease wait: 3 lease(s) of up to 120000 ms (read from the server) expire in 121.")
    assert sum("s left" in line for line in lines) == 12, "progress every 10 s"
    assert lines[-1].startswith("lease wait over after 121.")


def test_a_sibling_whose_set_up_failed_keeps_its_own_error():
    clock = FakeTime()
    broken = FakeWorld(clock, 1000, fails=Untestable("setup step 'send handoff' answered 500"))
    waiting = FakeWorld(clock, 1000)
    wait, _, _ = _wait(clock, [waiting, broken])
    assert wait.result(waiting).value is waiting
    with pytest.raises(Untestable, match="answered 500"):
        wait.result(broken)
    with pytest.raises(Untestable, match="answered 500"):  # the waiting check's own set-up fails at once
        _wait(clock, [FakeWorld(clock, 1000, fails=Untestable("answered 500"))])


def test_ctrl_c_ends_the_wait_and_every_waiting_check_reads_untestable():
    clock = FakeTime()
    clock.interrupt_after = 2
    worlds = [FakeWorld(clock, 120_000), FakeWorld(clock, 120_000)]
    wait, lines, stops = _wait(clock, worlds)
    assert stops == ["interrupted during the lease wait"]
    for world in worlds:
        with pytest.raises(Untestable, match=r"interrupted \(Ctrl-C\) 20.0 s into the lease wait"):
            wait.result(world)
    assert wait.covers(FakeWorld(clock, 1)), "after Ctrl-C no check waits again"
    assert not any(line.startswith("lease wait over") for line in lines)


def test_a_lease_too_close_to_expiry_for_its_step_is_set_up_again_last():
    clock = FakeTime()
    early = FakeWorld(clock, 1000, before=True)
    slow = FakeWorld(clock, 1000)
    original = slow.arrange

    def slow_arrange(world: FakeWorld) -> Arranged:
        clock.now += 5  # setting this lease up took longer than the first one lasts
        return original(world)

    slow.arrange = slow_arrange  # type: ignore[method-assign]
    wait, _, _ = _wait(clock, [early, slow])
    assert early.steps == [pytest.approx(105 + 1 - margin_before(1))], "set up again after the slow one"
    assert wait.result(early).before_answer() == "heartbeat receipt"


def test_a_step_that_still_comes_too_late_is_untestable_not_a_failure():
    clock = FakeTime()
    late = FakeWorld(clock, 1000, before=True)
    original = late.arrange

    def arrange_then_stall(world: FakeWorld) -> Arranged:
        arranged = original(world)
        clock.now += 5  # reading the lease back took longer than the lease lasts
        return arranged

    late.arrange = arrange_then_stall  # type: ignore[method-assign]
    wait, _, _ = _wait(clock, [late])
    assert late.steps == []
    with pytest.raises(Untestable, match="may have expired before the step"):
        wait.result(late).before_answer()


# -- the setting -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("given", "expected"), [
    ({}, False),
    ({"environ": {"AIDEMEMO_REAL_TIME_LEASES": "1"}}, True),
    ({"ini": {"aidememo_real_time_leases": "true"}}, True),
    ({"flags": {"real_time_leases": True}, "environ": {"AIDEMEMO_REAL_TIME_LEASES": "no"}}, True),
])
def test_the_setting_resolves_like_every_other(given, expected):
    _, settings = resolve_run(SettingsInput(**{"flags": {}, "environ": {}, **given}))
    assert settings[REAL_TIME_LEASES] is expected


def test_a_bad_value_names_its_origin(tmp_path):
    with pytest.raises(ConfigError, match="AIDEMEMO_REAL_TIME_LEASES: expected true or false, got 'soon'"):
        resolve_run(SettingsInput(flags={}, environ={"AIDEMEMO_REAL_TIME_LEASES": "soon"}))
    (tmp_path / "t.toml").write_text('real_time_leases = "yes please"\n')
    with pytest.raises(ConfigError, match="t.toml: real_time_leases: expected true or false"):
        resolve_run(SettingsInput(flags={"config": str(tmp_path / "t.toml")}, environ={}))


class _Config:
    """What ``configure`` reads of a pytest config."""

    def __init__(self, real_time: bool | None) -> None:
        self.stash = pytest.Stash()
        self._values = {"aidememo_config": None, "aidememo_real_time_leases": real_time}

    def getoption(self, name: str) -> object:
        return self._values[name]

    def getini(self, name: str) -> object:
        return None


@pytest.mark.parametrize(("real_time", "late"), [(True, "lease_expiry"), (None, None)])
def test_real_time_makes_the_lease_checks_late(monkeypatch, real_time, late):
    monkeypatch.delenv("AIDEMEMO_REAL_TIME_LEASES", raising=False)
    monkeypatch.delenv("AIDEMEMO_CONFIG", raising=False)
    config = _Config(real_time)
    configure(config)
    assert config.stash.get(LATE_MARKER, None) == late


def test_leases_set_up_ahead_expire_while_other_checks_run():
    # Real time, a short lease: begin() sets up and returns at once; the live step runs on its own
    # thread at its moment; finish() sleeps only what is left.
    wait = LeaseWait()
    worlds = [FakeWorld(_RealTime(), 400), FakeWorld(_RealTime(), 400, before=True)]
    lines: list[str] = []
    wait.begin(worlds, lambda world: world.arrange, lines.append)
    assert wait.begun and worlds[1].steps == [], "the step waits for its moment"
    assert lines and lines[0].startswith("leases set up ahead: 2 lease(s) of up to 400 ms (read from the server)")
    arranged = wait.finish(worlds[1], lines.append, lambda reason: None)
    assert arranged.before_answer() == "heartbeat receipt" and len(worlds[1].steps) == 1
    assert worlds[1].steps[0] < arranged.lease.sent_at + 0.4, "the step ran while the lease was surely live"
    assert time.monotonic() >= arranged.lease.surely_expired_at, "finish returns once the lease surely expired"
    assert wait.finish(worlds[0], lines.append, lambda reason: None).value is worlds[0]
    assert sum(line.startswith("lease wait over after") for line in lines) == 1, "one wait for all"


class _RealTime(FakeTime):
    def clock(self) -> float:
        return time.monotonic()

    @property  # type: ignore[override]
    def now(self) -> float:
        return time.monotonic()

    @now.setter
    def now(self, value: float) -> None:
        pass


class _Node:
    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_scheduler_sends_every_late_check_to_gw0_after_its_other_work(tmp_path):
    collection = [f"test_m.py::test_{i}" for i in range(40)]
    late = set(collection[-6:])
    (tmp_path / "late-gw1.json").write_text(json.dumps({"late": sorted(late), "collected": []}))
    config = type("Config", (), {"getvalue": lambda self, name: ["2*popen"]})()
    scheduler = LateScheduling(config, lambda *a: None, str(tmp_path))
    nodes = [_Node("gw1"), _Node("gw0")]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    while not scheduler.tests_finished:
        busy = [n for n in nodes if len(scheduler.node2pending[n]) >= (1 if n.shutting_down else 2)]
        node = busy[0]
        scheduler.mark_test_complete(node, scheduler.node2pending[node][0])
    ran = {n.gateway.id: [collection[i] for i in n.sent] for n in nodes}
    assert sorted(ran["gw0"] + ran["gw1"]) == sorted(collection), "every check runs once"
    assert set(ran["gw0"][-6:]) == late and not late & set(ran["gw1"]), "the late checks, last, on gw0"
    assert len(ran["gw0"]) > 6 and len(ran["gw1"]) > 6, "both workers share the other checks"


def test_an_arrangement_belongs_to_its_world_object_only() -> None:
    # Worlds compare by value and cannot be dictionary keys; an id alone may be reused by a later
    # world once an earlier one is gone. An equal world that is another object has no arrangement.
    from conformance.profiles.aidememo.leases import _ByWorld

    arranged, one, other = _ByWorld(), ["world"], ["world"]
    arranged[one] = Untestable("its own")
    assert one in arranged and other not in arranged and arranged.get(other) is None
    assert str(arranged[one]) == "its own"
    with pytest.raises(KeyError):
        arranged[other]
