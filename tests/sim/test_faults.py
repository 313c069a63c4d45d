"""Fault campaigns (``aidememo-sim run --faults``): the schedule, the proxy, the command line's
refusals, a short campaign against a reference served through ``[serve]`` (no finding), and the
planted variants of ``fault_mutants.py``, each found, and found again by the same command."""

from __future__ import annotations

import http.server
import json
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tomli_w

from simulations.cli import main
from simulations.faults.nemesis import FaultTarget, Nemesis
from simulations.faults.proxy import FaultProxy
from simulations.faults.report import PLOTS_MISSING
from simulations.faults.schedule import FaultSchedule, parse_faults
from simulations.errors import SimulationError
from simulations.targets import Lost

MUTANTS = Path(__file__).with_name("fault_mutants.py")
REF = shutil.which("aidememo-ref", path=str(Path(sys.executable).parent)) or "aidememo-ref"


def _target(path: Path, serve: list[str]) -> Path:
    path.write_text(tomli_w.dumps({
        "timeout_s": 10,
        "serve": {"command": [*serve, "serve", "--database", "{dir}/ref.sqlite", "--bind", "127.0.0.1:{port}",
                              "--test-clock"]},
        "capabilities": {"test-clock": True},
        "provision": {"command": f"{REF} bootstrap --database {{dir}}/ref.sqlite --tenant-id {{tenant}} --project-id "
                                 "{project} --actor-id {actor} --token-file {token_file} --role {role}"},
    }), encoding="utf-8")
    return path


def _campaign(tmp: Path, config: Path, faults: str, seed: int, batches: int,
              capsys: pytest.CaptureFixture[str]) -> tuple[int, str, dict[str, object]]:
    code = main(["run", "--config", str(config), "--faults", faults, "--seed", str(seed), "--batches", str(batches),
                 "--budget", "120", "--out", str(tmp)])
    out = capsys.readouterr().out
    report = json.loads((tmp / f"faults-seed-{seed}" / "faults.json").read_text())
    return code, out, report


def test_the_schedule_is_the_seeds() -> None:
    kinds = parse_faults("kill,pause,drop-answers,reset")
    first, again = FaultSchedule(7, kinds).upto(200), FaultSchedule(7, kinds).upto(200)
    assert first == again and first != FaultSchedule(8, kinds).upto(200)
    assert {f.kind for f in first} == set(kinds)
    # batch by batch: a longer run has the shorter run's faults, at the same batches
    assert FaultSchedule(7, kinds).upto(50) == [f for f in first if f.batch < 50]
    assert all(f.kind == "reset" for f in FaultSchedule(7, ("reset",)).upto(100))


@pytest.mark.parametrize(("argv", "says"), [
    (["--faults", "kill,fire"], "unknown fault 'fire'"),
    (["--faults", "pause", "--url", "http://127.0.0.1:9", "--project", "p"], "[serve]"),
])
def test_bad_faults_are_one_line_and_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("claims", [None, False])
def test_clock_jump_needs_a_target_file_claiming_the_test_clock(tmp_path: Path, claims: bool | None,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "target.toml"
    config.write_text('url = "http://127.0.0.1:9"\n' + ("" if claims is None else "[capabilities]\ntest-clock = false\n"),
                      encoding="utf-8")
    for where in (["--config", str(config)], ["--url", "http://127.0.0.1:9", "--project", "p"]):
        assert main(["run", *where, "--faults", "reset,clock-jump"]) == 2
        err = capsys.readouterr().err
        assert "--faults clock-jump needs a target file that claims the test-clock capability" in err
        assert len(err.strip().splitlines()) == 1


def test_kill_needs_serve_in_the_target_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "target.toml"
    config.write_text('url = "http://127.0.0.1:9"\n', encoding="utf-8")
    assert main(["run", "--config", str(config), "--faults", "drop-answers,kill"]) == 2
    assert "--faults kill needs the target file's [serve] command" in capsys.readouterr().err


class _Counting:
    def __init__(self, server: http.server.ThreadingHTTPServer) -> None:
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="upstream")
def counting_upstream() -> Iterator[tuple[str, list[str]]]:
    """A server that counts the POSTs it ran."""
    ran: list[str] = []
    server = _counting_server(ran)
    yield server.url, ran
    server.close()


def _counting_server(ran: list[str]) -> _Counting:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            ran.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return _Counting(server)


@pytest.mark.parametrize(("kind", "before", "runs"),
                         [("drop-answers", False, 1), ("reset", False, 1), ("reset", True, 0)])
def test_the_proxy_loses_answers_of_writes_it_let_through_or_not(upstream: tuple[str, list[str]], kind: str,
                                                                 before: bool, runs: int) -> None:
    url, ran = upstream
    proxy = FaultProxy(url).start()
    try:
        proxy.arm(kind, 1, before=before)
        with pytest.raises(httpx.TransportError):
            httpx.post(f"{proxy.url}/v1/commands", content=b"first")
        assert ran == ["first"] * runs
        answer = httpx.post(f"{proxy.url}/v1/commands", content=b"second")  # armed for one only
        assert (answer.status_code, answer.content, ran[-1]) == (200, b"ok", "second")
        assert (proxy.dropped, proxy.resets) == ((1, 0) if kind == "drop-answers" else (0, 1))
    finally:
        proxy.close()


class _Slow(http.server.BaseHTTPRequestHandler):
    """Answers a write after 60 ms (longer than a pause or clock jump's delay after a send), 409
    to a body starting ``refused``; ``ran`` is the writes it answered, in order."""

    protocol_version = "HTTP/1.1"
    ran: list[str] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        time.sleep(0.06)
        self.ran.append(body)
        self.send_response(409 if body.startswith("refused") else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_a_kill_falls_as_the_answer_to_the_nth_accepted_write_reaches_the_proxy() -> None:
    # A kill timed by the clock (some ms after a write is sent) lands before or after the answer
    # by chance, and a replay does not repeat it; timed by the answer it always lands between the
    # server's answer and the client's receiving it.
    seed = next(s for s in range(1000) if (f := FaultSchedule(s, ("kill",)).at(2)) is not None and f.after_posts == 1)
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Slow,), {"ran": []}))
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    ran: list[str] = upstream.RequestHandlerClass.ran  # type: ignore[attr-defined]
    received: list[str] = []
    kills: list[tuple[list[str], list[str]]] = []

    class Server:
        url, others = f"http://127.0.0.1:{upstream.server_address[1]}", ()

        def kill(self) -> None:
            kills.append((list(ran), list(received)))

        def restart(self) -> None:
            pass

    proxy = FaultProxy(Server.url).start()
    tokens = {"agent-a": "token-a-0123456789", "agent-b": "token-b-0123456789"}
    target = FaultTarget(proxy.url, "p", tokens, timeout_s=5, started=time.monotonic())
    nemesis = Nemesis(schedule=FaultSchedule(seed, ("kill",)), target=target, proxy=proxy, servers=(Server(),))
    try:
        nemesis.before(2)
        for body in ("refused-0", "w0", "w1"):  # a refusal counts for nothing: it committed nothing
            try:
                target.request("agent-a", "POST", "/v1/projects/p/commands", body.encode())
                received.append(body)
            except Lost:
                received.append(f"{body} lost")
        assert not nemesis.after(2)
    finally:
        proxy.close()
        upstream.shutdown()
        upstream.server_close()
    # The second accepted write's answer was in the proxy's hands, not yet the client's; it still got it.
    assert kills == [(["refused-0", "w0", "w1"], ["refused-0", "w0"])] and received[-1] == "w1", (kills, received)
    assert nemesis.kills == 1
    assert [w.kind for w in nemesis.windows] == ["kill"]


def test_the_proxy_balances_over_servers_skips_one_down_and_moves_every_clock(
        upstream: tuple[str, list[str]]) -> None:
    url, ran = upstream
    other: list[str] = []
    second = _counting_server(other)
    proxy = FaultProxy(url, second.url).start()
    try:
        for i in range(4):
            assert httpx.post(f"{proxy.url}/v1/commands", content=f"w{i}".encode()).status_code == 200
        assert len(ran) == 2 and len(other) == 2
        proxy.down(0)
        for i in range(3):
            httpx.post(f"{proxy.url}/v1/commands", content=f"d{i}".encode())
        assert len(ran) == 2 and other[-3:] == ["d0", "d1", "d2"]
        proxy.up(0)
        httpx.post(f"{proxy.url}/__test__/clock", content=b'{"advance_ms": 5}')
        assert ran[-1] == other[-1] == '{"advance_ms": 5}' and proxy.clock_moved_ms == 5
        proxy.down(0)
        proxy.down(1)
        with pytest.raises(httpx.TransportError):  # every server down: the connection is reset
            httpx.post(f"{proxy.url}/v1/commands", content=b"lost")
    finally:
        proxy.close()
        second.close()


def test_a_short_fault_campaign_against_the_served_reference_finds_nothing_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Seed 1 over these kinds: answers dropped in batch 4, a kill in batch 5, a pause in batch 6.
    config = _target(tmp_path / "served.toml", [REF])
    code, out, report = _campaign(tmp_path, config, "kill,pause,drop-answers", 1, 8, capsys)
    assert code == 0, out
    again = _campaign(tmp_path / "again", config, "kill,pause,drop-answers", 1, 8, capsys)[2]
    same = ("schedule", "verdict", "findings")
    assert [again[k] for k in same] == [report[k] for k in same]
    assert (again["injected"]["kills"], again["injected"]["pauses"]) == (1, 1)
    assert [(f["batch"], f["kind"]) for f in report["schedule"]] == [(4, "drop-answers"), (5, "kill"), (6, "pause")]
    assert report["injected"]["kills"] == 1 and report["injected"]["pauses"] == 1
    assert report["findings"] == [] and report["verdict"] == "ok"
    assert len(report["recovery_s"]) == 1
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("1 kills, 1 pauses, ") and summary.endswith("verdict OK")
    assert (tmp_path / "faults-seed-1" / "timeline.html").read_text().count("<rect") == 3
    assert "replay this run with: aidememo-sim run --seed 1 " in out and "--faults kill,pause,drop-answers" in out
    assert (PLOTS_MISSING in out) != (tmp_path / "faults-seed-1" / "latency.png").exists()


def _found_twice(tmp_path: Path, mutant: str, faults: str, seed: int, batches: int, rule: str,
                 capsys: pytest.CaptureFixture[str]) -> None:
    """The campaign finds ``rule`` broken, and the same command does again: the same faults at
    the same batches, the same verdict. (Which other rules a finding also breaks can differ: the
    requests a fault meets are the network's.)"""
    config = _target(tmp_path / f"{mutant}.toml", [sys.executable, str(MUTANTS), mutant])
    seen = []
    for attempt in ("a", "b"):
        code, out, report = _campaign(tmp_path / attempt, config, faults, seed, batches, capsys)
        assert code == 1, out
        findings = report["findings"]
        assert isinstance(findings, list) and rule in {f["rule"] for f in findings}, out
        assert all(f["replay"] == report["replay"] for f in findings)
        seen.append((report["schedule"], report["verdict"]))
    # A run stops at its first finding, whose batch the network's timing decides: the faults both
    # runs reached are the same ones at the same batches (one schedule is a prefix of the other).
    (first, verdict_a), (second, verdict_b) = seen
    shorter = min(len(first), len(second))
    assert shorter >= 1 and first[:shorter] == second[:shorter] and verdict_a == verdict_b, seen


def test_clock_jumps_and_a_kill_on_the_served_reference_find_nothing_and_time_never_goes_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Seed 1 over these kinds: a jump 1359 ms short of a lease in batch 4, a kill in batch 5, a
    # jump 390 ms short of one in batch 6 (with the planner's own moves past a lease, claims
    # expire under the races). The restarted reference's test clock starts again from its wall
    # clock; the proxy moves it back, so no batch is timed before one already answered.
    config = _target(tmp_path / "served.toml", [REF])
    code, out, report = _campaign(tmp_path, config, "kill,clock-jump", 1, 10, capsys)
    assert code == 0, out
    assert [(f["batch"], f["kind"]) for f in report["schedule"]] == [(4, "clock-jump"), (5, "kill"), (6, "clock-jump")]
    assert report["injected"]["clock_jumps"] == 2 and report["injected"]["kills"] == 1
    assert out.strip().splitlines()[-1].startswith("1 kills, 0 pauses, 0 answers dropped, 0 resets, 2 clock jumps; ")
    times = [json.loads(line)["input"].get("now_ms")
             for line in (tmp_path / "faults-seed-1" / "history.jsonl").read_text().splitlines()[1:]]
    times = [t for t in times if t is not None]
    assert times == sorted(times) and times[-1] - times[0] > 2 * 118_000


PG = "--canonical-backend postgres --postgres-transport insecure-no-tls"


def test_kills_of_one_of_two_postgresql_servers_on_one_database_find_nothing(
        tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Seed 8 over two servers: a jump, a kill of the first, a kill of the second, two jumps, a
    # kill of the second. The proxy balances the requests over both; the one killed gets none
    # until it is back, its test clock with the other's.
    monkeypatch.setenv("AIDEMEMO_POSTGRES_URL", postgres_url)  # the commands read it; no URL in a command line
    serve = {"command": f"{REF} serve {PG} --artifact-backend disabled --bind 127.0.0.1:{{port}} --test-clock"}
    config = tmp_path / "pg.toml"
    config.write_text(tomli_w.dumps({
        "timeout_s": 10, "serve": [serve, serve], "capabilities": {"test-clock": True, "artifacts": False},
        "provision": {"command": f"{REF} bootstrap {PG} --tenant-id {{tenant}} --project-id {{project}} --actor-id "
                                 "{actor} --token-file {token_file} --role {role}"},
    }), encoding="utf-8")
    code, out, report = _campaign(tmp_path, config, "kill,clock-jump", 8, 10, capsys)
    assert code == 0, out
    kills = [(f["batch"], f["server"]) for f in report["schedule"] if f["kind"] == "kill"]
    assert kills == [(4, 0), (5, 1), (8, 1)] and report["injected"]["kills"] == 3, report["schedule"]
    assert report["findings"] == [] and report["verdict"] == "ok"
    logs = [(tmp_path / name).read_text() for name in ("serve.log", "serve-2.log")]
    assert all(log.count("aidememo-ref serving") == 1 + len([k for k in kills if k[1] == i]) for i, log in enumerate(logs))
    assert postgres_url not in out


def test_a_heartbeat_that_revives_an_expired_lease_is_found_under_clock_jumps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The jumps' windows widen the times the model allows, and must not hide a lease bug.
    _found_twice(tmp_path, "heartbeat_revives", "clock-jump", 7, 20, "linearizability", capsys)


def test_receipts_kept_in_memory_are_found_and_found_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _found_twice(tmp_path, "memory_receipts", "kill", 7, 12, "receipts survive restarts", capsys)


def test_a_fault_finding_is_shrunk_and_its_replay_file_shows_it_again_and_not_on_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted = _target(tmp_path / "memory_receipts.toml", [sys.executable, str(MUTANTS), "memory_receipts"])
    code, out, report = _campaign(tmp_path / "run", planted, "kill,drop-answers", 7, 12, capsys)
    assert code == 1, out
    replay = tmp_path / "run" / "faults-seed-7" / "replay.json"
    doc = json.loads(replay.read_text())
    assert len(report["schedule"]) == 2 and doc["keep"] == [6] and [f["batch"] for f in doc["schedule"]] == [6], out
    assert doc["rules"][0] == "receipts survive restarts" and f"aidememo-sim replay {replay} --config" in out
    script = (tmp_path / "run" / "faults-seed-7" / "finding.sh").read_text()
    assert "Reproduces: fault finding: receipts survive restarts" in script and "restart_server" in script
    for config, shown in ((planted, 1), (_target(tmp_path / "reference.toml", [REF]), 0)):
        assert main(["replay", str(replay), "--config", str(config), "--times", "2"]) == shown
        said = capsys.readouterr().out
        assert f"reproduced {2 * shown}/2" in said and said.count("1 kills, 0 pauses, 0 answers dropped") == 2, said
    assert main(["replay", str(replay)]) == 2  # a replay file never names the server it starts
    err = capsys.readouterr().err
    assert "give --config" in err and len(err.strip().splitlines()) == 1


def test_a_forgotten_sequence_head_is_found_and_found_again(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _found_twice(tmp_path, "forget_seq_head", "kill", 7, 12, "answered writes in the feed", capsys)


def test_an_answer_before_its_commit_is_found_and_its_replay_file_shows_it_5_of_5(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The variant commits 150 ms after it answers. A kill timed some ms after a write is sent met
    # that window by chance (3 of 5 replays on a loaded machine); timed by the answer in the
    # proxy's hands, it falls inside it every time. (test_a_kill_falls_as_the_answer_... shows
    # the timing itself, and fails on a kill timed from the sending.)
    planted = _target(tmp_path / "answer_before_commit.toml", [sys.executable, str(MUTANTS), "answer_before_commit"])
    code, out, report = _campaign(tmp_path / "run", planted, "kill", 7, 20, capsys)
    assert code == 1 and "receipts survive restarts" in {f["rule"] for f in report["findings"]}, out
    replay = tmp_path / "run" / "faults-seed-7" / "replay.json"
    assert main(["replay", str(replay), "--config", str(planted), "--times", "5"]) == 1
    said = capsys.readouterr().out
    assert "reproduced 5/5" in said, said


def test_a_retried_accept_that_transitions_again_is_found(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _found_twice(tmp_path, "retry_second_transition", "drop-answers", 7, 20, "linearizability", capsys)


def test_parse_faults_keeps_order_and_drops_repeats() -> None:
    assert parse_faults("reset,kill,reset") == ("reset", "kill")
    with pytest.raises(SimulationError, match="unknown fault ''"):
        parse_faults("kill,")


def test_a_command_first_sent_without_an_answer_may_have_committed_from_then() -> None:
    # A kill or a lost answer leaves a command's first sending indeterminate; its later replay
    # answers the receipt it committed back then, below sequences answered in between.
    from simulations.linearizability.history import Operation
    from simulations.receipts import ReceiptChecks

    def receipt(seq: int, handoff: str, revision: int) -> dict[str, object]:
        return {"http": 200, "code": None, "revision": revision, "receipt": {
            "project_seq": seq, "resource": {"kind": "handoff", "id": handoff}, "revision": revision,
            "actor_id": "agent-a", "committed_at_ms": 1}}

    lost = Operation(client=1, input={"command_id": "accept-1"}, output=None, call_ns=1, return_ns=None)
    other = Operation(client=2, input={"command_id": "beat-2"}, output=receipt(11, "h2", 6), call_ns=2, return_ns=3)
    replay = Operation(client=1, input={"command_id": "accept-1"}, output=receipt(10, "h1", 5), call_ns=4, return_ns=5)
    assert ReceiptChecks().add([lost, other, replay]) == []
    assert [v.why for v in ReceiptChecks().add([other, replay])] == [
        "project_seq 10 committed after 11 had been answered"]


def test_requests_are_plotted_by_operation_kind_not_by_id() -> None:
    from simulations.faults.nemesis import operation_kind

    assert [operation_kind(m, p) for m, p in [
        ("POST", "/v1/projects/p/handoffs/h-1/accept"), ("POST", "/v1/projects/p/handoffs"),
        ("GET", "/v1/projects/p/handoffs/h-1"), ("GET", "/v1/projects/p/changes?after_seq=3"),
        ("POST", "/v1/commands"), ("GET", "/v1/projects/p/resources/custom.x/w1")]] == [
        "POST accept", "POST handoffs", "GET handoffs", "GET changes", "POST commands", "GET resources"]


@pytest.mark.parametrize(("mutant", "rule"), [("memory_receipts", "receipts survive restarts"),
                                              ("forget_seq_head", "answered writes in the feed")])
def test_the_standalone_script_of_a_fault_finding_kills_and_restarts_the_server_itself(tmp_path: Path, mutant: str,
                                                                                        rule: str) -> None:
    import os
    import signal
    import subprocess
    import time

    from conformance.reproduction.record import Verdict
    from conformance.reproduction.runner import replay
    from conformance.reproduction.script import render_script
    from conformance.serve import free_port
    from simulations.faults.standalone import fault_reproduction

    def script_against(serve: list[str], name: str) -> subprocess.CompletedProcess[str]:
        folder = tmp_path / name
        folder.mkdir()
        port = free_port()
        command = " ".join([*serve, "serve", "--database", str(folder / "ref.sqlite"), "--bind", f"127.0.0.1:{port}"])
        template = (f"{REF} bootstrap --database {folder / 'ref.sqlite'} --tenant-id {{tenant}} --project-id "
                    "{project} --actor-id {actor} --token-file {token_file} --role {role}")
        repro = fault_reproduction(rule, ("AM-CMD-2",), "found", template=template,
                                   workdir=str(folder), replay="aidememo-sim replay replay.json --config t.toml")
        assert replay(repro, base_url=f"http://127.0.0.1:{port}").verdict is Verdict.CANNOT_RUN  # no kill in Python
        script = folder / "finding.sh"
        script.write_text(render_script(repro))
        pid_file = folder / "server.pid"
        server = subprocess.Popen(["sh", "-c", f"exec {command}"], start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid_file.write_text(f"{server.pid}\n")
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            return subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120, cwd=folder,
                                  env={**os.environ, "BASE_URL": f"http://127.0.0.1:{port}",
                                       "SERVER_PID_FILE": str(pid_file), "RESTART_COMMAND": command})
        finally:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the restarted server, its pid written back
            server.wait()

    planted = script_against([sys.executable, str(MUTANTS), mutant], "planted")
    assert planted.returncode == 1 and "THE BUG SHOWS" in planted.stdout, planted.stdout + planted.stderr
    shown = {"memory_receipts": "step3: HTTP 409, not 200", "forget_seq_head": "step5: entries.0.seq is 2, not 1"}
    assert shown[mutant] in planted.stdout, planted.stdout
    assert "killed (kill -9) and started again" in planted.stdout
    reference = script_against([REF], "reference")
    assert reference.returncode == 0, reference.stdout + reference.stderr
    unset = subprocess.run(["sh", str(tmp_path / "planted" / "finding.sh")], capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k not in ("SERVER_PID_FILE", "RESTART_COMMAND")})
    assert unset.returncode == 2 and "set SERVER_PID_FILE" in unset.stdout
