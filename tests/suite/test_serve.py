"""``[serve]``: the kit starts the server it tests, waits for ``/health``, and stops it (SIGTERM,
then SIGKILL of its process group), with servers that start slowly, never come up or ignore SIGTERM,
and the real ``aidememo-ref serve``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import tomli_w

from conformance.serve import ServedServer, ServeError, ServeSpec, Served, free_port

FAKES = str(Path(__file__).with_name("serve_fakes.py"))
BOOTSTRAP = ("aidememo-ref bootstrap --database {dir}/ref.sqlite --tenant-id {tenant} --project-id {project} "
             "--actor-id {actor} --token-file {token_file} --role {role}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _fake(tmp_path: Path, mode: str, **timing: float) -> ServedServer:
    spec = ServeSpec(command=(sys.executable, FAKES, mode, "{port}", str(tmp_path / "pids")), base_dir=tmp_path,
                     **timing)  # type: ignore[arg-type]
    return ServedServer(spec, url="http://127.0.0.1:{port}", served=Served(free_port(), str(tmp_path)),
                        log_path=tmp_path / "serve.log")


def _pids(tmp_path: Path) -> list[int]:
    for _ in range(200):
        if (tmp_path / "pids").is_file() and (text := (tmp_path / "pids").read_text()):
            return [int(p) for p in text.split()]
        time.sleep(0.02)
    raise AssertionError("the fake server wrote no pid")


def test_a_slow_server_is_waited_for_and_its_health_answer_kept(tmp_path):
    server = _fake(tmp_path, "slow", ready_timeout_s=20)
    started = time.monotonic()
    server.start()
    try:
        assert server.wait_ready() == {"status": "ok", "fake": True}
        assert time.monotonic() - started >= 1.4, "ready before the server listened"
        assert server.health == {"status": "ok", "fake": True}
    finally:
        assert server.stop() is not None
    assert "loading its data" in (tmp_path / "serve.log").read_text()


def test_a_server_that_never_answers_is_one_error_naming_its_last_output_and_is_killed(tmp_path):
    server = _fake(tmp_path, "never", ready_timeout_s=1)
    server.start()
    with pytest.raises(ServeError) as caught:
        server.wait_ready()
    message = str(caught.value)
    assert "did not answer" in message and "within 1 s" in message and "warming up the cache" in message
    assert "\n" not in message
    assert not any(_alive(pid) for pid in _pids(tmp_path))


def test_a_server_that_exits_is_one_error_naming_its_last_output(tmp_path):
    spec = ServeSpec(command=(sys.executable, "-c", "print('bind 127.0.0.1:1: permission denied'); raise SystemExit(3)"),
                     base_dir=tmp_path)
    server = ServedServer(spec, url="http://127.0.0.1:{port}", served=Served(free_port(), str(tmp_path)),
                          log_path=tmp_path / "serve.log")
    server.start()
    with pytest.raises(ServeError, match=r"exited with status 3 .*permission denied"):
        server.wait_ready()


def test_a_server_that_ignores_sigterm_and_its_children_are_killed_after_the_grace(tmp_path):
    server = _fake(tmp_path, "stubborn", ready_timeout_s=20, stop_grace_s=0.5)
    server.start()
    server.wait_ready()
    pids = _pids(tmp_path)
    assert len(pids) == 2
    started = time.monotonic()
    assert server.stop() == -signal.SIGKILL
    assert time.monotonic() - started >= 0.5, "killed before the grace was over"
    for _ in range(100):  # the child is reaped by init, a moment later
        if not any(_alive(pid) for pid in pids):
            break
        time.sleep(0.02)
    assert not any(_alive(pid) for pid in pids), "a process of the server's group outlived its stop"


def test_pause_kill_and_restart_on_the_same_port(tmp_path):
    server = _fake(tmp_path, "slow", ready_timeout_s=20)
    server.start()
    server.wait_ready()
    try:
        server.pause()
        with pytest.raises(httpx.TimeoutException):
            httpx.get(f"{server.url}/health", timeout=0.5)
        server.resume()
        assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
        first = server.process.pid if server.process else 0
        server.kill()
        assert not _alive(first)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{server.url}/health", timeout=2)
        assert server.restart() == {"status": "ok", "fake": True}
        assert server.process is not None and server.process.pid != first
    finally:
        server.stop()
    assert (tmp_path / "serve.log").read_text().count("listening on") == 2, "a restart's output replaced the first's"


def _target(path: Path, serve: object, **more: object) -> Path:
    path.write_text(tomli_w.dumps({"serve": serve, **more}), "utf-8")
    return path


def _cli(*args: str, cwd: Path, module: str = "conformance.cli") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_run_with_a_server_that_never_comes_up_is_one_line_and_exit_2(tmp_path):
    target = _target(tmp_path / "target.toml",
                     {"command": [sys.executable, FAKES, "never", "{port}", str(tmp_path / "pids")], "ready_timeout": 1},
                     provision={"tokens": [{"project": "p", "actor": "a", "token": "t"}]})
    done = _cli("run", "--config", str(target), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "warming up the cache" in lines[0] and "/health" in lines[0], done.stderr
    assert (tmp_path / "aidememo-report" / "serve.log").is_file()
    assert not any(_alive(pid) for pid in _pids(tmp_path))


def test_plain_pytest_does_not_pretend_to_serve(tmp_path):
    from conformance.errors import ConfigError
    from conformance.installed import resolve_run
    from conformance.plugin import _refuse_unserved
    from conformance.settings import SettingsInput

    target = _target(tmp_path / "target.toml", {"command": "server --port {port}"}, provision={"command": BOOTSTRAP})
    _, settings = resolve_run(SettingsInput(flags={"config": str(target)}, environ={}))
    assert settings.values["url"] == "http://127.0.0.1:{port}"
    with pytest.raises(ConfigError, match="started by `aidememo-conformance run`"):
        _refuse_unserved(settings)
    # A URL of the user's own overrides [serve]: nothing is started, nothing refused.
    _, given = resolve_run(SettingsInput(flags={"config": str(target), "url": "http://127.0.0.1:3030"}, environ={}))
    assert given.values["url"] == "http://127.0.0.1:3030"
    _refuse_unserved(given)


@pytest.mark.parametrize("serve", [
    {"command": ""}, {"command": "x", "grace": 1}, {"command": "x", "ready_timeout": -1}, "x", {"command": ["x", 3]},
    [], [{"command": "x"}, {"command": ""}],
])
def test_a_bad_serve_table_is_one_line(tmp_path, serve):
    target = tmp_path / "target.toml"
    target.write_text(tomli_w.dumps({"serve": serve, "provision": {"command": BOOTSTRAP}}), "utf-8")
    done = _cli("run", "--config", str(target), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "serve" in done.stderr, done.stderr


def _reference_target(tmp_path: Path) -> Path:
    # Relative to the target file's directory, where the command runs.
    return _target(tmp_path / "target.toml",
                   {"command": "aidememo-ref serve --database {dir}/ref.sqlite --bind 127.0.0.1:{port} --test-clock",
                    "stop_grace": 5},
                   capabilities={"test-clock": True, "artifacts": False}, provision={"command": BOOTSTRAP})


def test_run_starts_and_stops_the_real_reference_through_serve(tmp_path):
    target = _reference_target(tmp_path)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    done = _cli("run", "--config", str(target), "--requirement", "AM-HO-1", "--report-dir", "out", cwd=elsewhere)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    report = elsewhere / "out"
    results = json.loads((report / "results.json").read_text())
    assert results["counts"]["PASS"] >= 1 and results["target"].startswith("http://127.0.0.1:")
    assert "aidememo-ref serving " + results["target"] in (report / "serve.log").read_text()
    assert "started the target's server at " + results["target"] in done.stderr
    with pytest.raises(httpx.TransportError):  # stopped with the run
        httpx.get(results["target"] + "/health", timeout=2)
    assert "{port}" not in done.stdout and f"--config {target}" in done.stdout  # the rerun starts it again
    _names_its_provenance(results, (report / "report.html").read_text())


def test_two_serve_tables_start_two_servers_on_one_database_and_stop_both(tmp_path):
    command = "aidememo-ref serve --database {dir}/ref.sqlite --bind 127.0.0.1:{port} --test-clock"
    target = _target(tmp_path / "target.toml", [{"command": command, "stop_grace": 5}, {"command": command}],
                     capabilities={"test-clock": True, "artifacts": False}, provision={"command": BOOTSTRAP})
    done = _cli("run", "--config", str(target), "--requirement", "AM-HO-1", "--report-dir", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    report = tmp_path / "out"
    first = json.loads((report / "results.json").read_text())["target"]  # the suite reaches the first
    urls = [line.split()[2] for log in ("serve.log", "serve-2.log")
            for line in (report / log).read_text().splitlines() if line.startswith("aidememo-ref serving ")]
    assert len(urls) == 2 and urls[0] == first and urls[1] != first, urls
    assert done.stderr.count("started the target's server at ") == 2
    for url in urls:
        with pytest.raises(httpx.TransportError):  # both stopped with the run
            httpx.get(url + "/health", timeout=2)


def _names_its_provenance(results: dict[str, object], page: str) -> None:
    from refkit.version import PROTOCOL_COMMIT, VERSION

    assert results["kit_version"] == VERSION and results["protocol_commit"] == PROTOCOL_COMMIT == "e2a15d4"
    health = results["health"]
    assert isinstance(health, dict) and health["status"] == "ok" and "schema_version" in health
    assert f"commit <code>{PROTOCOL_COMMIT}</code>" in page and "schema_version" in page and VERSION in page


def test_diff_starts_the_served_reference_and_names_its_health(tmp_path):
    target = _reference_target(tmp_path)
    done = _cli("diff", "--config", str(target), "--steps", "30", "--report-dir", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    _names_its_provenance(json.loads((tmp_path / "out" / "diff.json").read_text()),
                          (tmp_path / "out" / "diff.html").read_text())
    assert "aidememo-ref serving" in (tmp_path / "out" / "serve.log").read_text()


def test_sim_run_starts_the_served_reference(tmp_path):
    target = _reference_target(tmp_path)
    done = _cli("run", "--config", str(target), "--budget", "1", "--out", str(tmp_path / "sim"), cwd=tmp_path,
                module="simulations.cli")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "verdict OK" in done.stdout
    assert "aidememo-ref serving" in (tmp_path / "sim" / "serve.log").read_text()


def test_a_killed_reference_restarts_on_the_same_port_and_data(tmp_path):
    """What a fault campaign does: SIGKILL of the group, then the same command on the same data."""
    from aidememo_client import AideMemoClient

    spec = ServeSpec(command=tuple("aidememo-ref serve --database {dir}/ref.sqlite --bind 127.0.0.1:{port}".split()),
                     base_dir=tmp_path)
    server = ServedServer(spec, url="http://127.0.0.1:{port}", served=Served(free_port(), str(tmp_path)),
                          log_path=tmp_path / "serve.log")
    token = tmp_path / "w.token"
    token.write_text("t" * 64)
    token.chmod(0o600)
    server.start()
    try:
        assert server.wait_ready()["status"] == "ok"
        subprocess.run(["aidememo-ref", "bootstrap", "--database", f"{tmp_path}/ref.sqlite", "--tenant-id", "t",
                        "--project-id", "p", "--actor-id", "a", "--token-file", str(token)], check=True, timeout=60)
        AideMemoClient(server.url, "t" * 64, "p").create_session("session-1", "Review", source_id="x")
        url = server.url
        server.kill()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)
        assert server.restart()["status"] == "ok" and server.url == url
        snapshot = httpx.get(f"{url}/v1/projects/p/snapshot", headers={"authorization": "Bearer " + "t" * 64}).json()
        assert [r["resource"]["id"] for r in snapshot["resources"]] == ["session-1"]
    finally:
        server.stop()


def test_a_log_planted_as_a_link_is_refused_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    report = tmp_path / "aidememo-report"
    report.mkdir()
    (report / "serve.log").symlink_to(victim)
    target = _reference_target(tmp_path)
    done = _cli("run", "--config", str(target), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "serve.log" in done.stderr and victim.read_text() == "keep"


def test_a_command_that_does_not_exist_is_one_line(tmp_path):
    target = _target(tmp_path / "target.toml", {"command": "no-such-server-binary --port {port}"},
                     provision={"command": BOOTSTRAP})
    done = _cli("run", "--config", str(target), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-server-binary" in lines[0] and "could not start" in lines[0], done.stderr


def test_sim_finds_a_race_on_a_served_variant_and_its_replay_serves_it_again(tmp_path):
    target = _target(tmp_path / "target.toml",
                     {"command": [sys.executable, str(Path(__file__).with_name("serve_mutant.py")), "cas_ignored",
                                  "{dir}/ref.sqlite", "{port}"]},
                     provision={"command": BOOTSTRAP})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}

    def sim(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "simulations.cli", *args], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env=env)

    found = sim("run", "--config", str(target), "--budget", "20", "--seed", "3", "--out", "out")
    assert found.returncode == 1 and (tmp_path / "out" / "race-seed-3.json").is_file(), found.stdout[-2000:]
    refused = sim("replay", "out/race-seed-3.json")  # a recorded target file is data: named, not run
    assert refused.returncode == 2 and f"--config {target}" in refused.stderr, refused.stderr
    assert (tmp_path / "out" / "serve.log").read_text().count("mutant cas_ignored serving") == 1
    replayed = sim("replay", "out/race-seed-3.json", "--config", str(target))  # its server started again
    assert replayed.returncode == 1 and "reproduced 1/1" in replayed.stdout, replayed.stdout[-2000:] + replayed.stderr
    assert (tmp_path / "out" / "serve.log").read_text().count("mutant cas_ignored serving") >= 2
