"""How the aidememo-local profile runs its checks: started ahead together, the kit's CLI on a
bytecode cache of the run, and seeded texts that stay each check's own when checks overlap."""

from __future__ import annotations

import json
import random
import sys
import threading
from pathlib import Path

import pytest

from conformance.capabilities import CAPABILITIES
from conformance.cli import main
from conformance.profile import CLI, MAX_BODY_BYTES, TIMEOUT, StartContext
from conformance.profiles.aidememo_local import PROFILE
from conformance.profiles.aidememo_local import world as local_world
from conformance.profiles.aidememo_local.target import start
from conformance.world import BaseWorld

OVERLAPPED = ["test_local.py::test_a_competing_claim_is_refused", "test_local.py::test_run_refuses_a_manual_profile"]


def test_checks_run_ahead_at_once_with_the_serial_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each check's first command waits until the other check is in its first command too: run one
    # after the other, the first check would wait alone and the barrier break.
    gate = threading.Barrier(len(OVERLAPPED), timeout=60)
    first: set[int] = set()
    run_command = local_world.run_command

    def meeting(*args: object, **kwargs: object) -> object:
        if threading.get_ident() not in first:
            first.add(threading.get_ident())
            gate.wait()
        return run_command(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(local_world, "run_command", meeting)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert PROFILE.overlap >= len(OVERLAPPED)
    code = main(["run", "--profile", "aidememo-local", "--seed", "7", "--capability", "mcp", *OVERLAPPED])
    results = json.loads((tmp_path / "aidememo-report" / "results.json").read_text())
    assert {r["requirement"]: r["verdict"] for r in results["records"]} == {"AML-CLAIM-2": "PASS", "AML-RUN-1": "PASS"}
    assert code == 0 and not gate.broken


def test_the_kits_cli_gets_a_bytecode_cache_of_the_run_when_none_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)

    def started(command: tuple[str, ...] | None) -> object:
        values = {CLI.name: command, TIMEOUT.name: 30.0, MAX_BODY_BYTES.name: 1 << 20,
                  CAPABILITIES.name: {"mcp": False, "remote": False}}
        settings = type("Given", (), {"__getitem__": lambda self, setting: values[setting.name]})()
        return start(StartContext(settings=settings, capabilities=PROFILE.capabilities, config=None))  # type: ignore[arg-type]

    embedded = started(None)
    try:
        cache = Path(embedded.root) / "pycache"  # type: ignore[attr-defined]
        assert embedded.environ == {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(cache)}  # type: ignore[attr-defined]
        world = local_world.LocalWorld(rng=random.Random(1), run_tag="r", check_tag="c", target=embedded)  # type: ignore[arg-type]
        done = world.run("--json", "session", "list")
        assert done.exit_code == 0, done.stderr
        assert list(cache.rglob("*.pyc")), "the CLI wrote no bytecode to the run's cache"
        # The transcript shows what the check set (the neutral variables, emptied), never the cache's.
        assert dict(done.env) == local_world._NEUTRAL, f"recorded {dict(done.env)}"
    finally:
        embedded.close()  # type: ignore[attr-defined]
    given = started(("aidememo",))
    try:
        assert given.environ == {}, "a command line given with --cli is run as given"  # type: ignore[attr-defined]
    finally:
        given.close()  # type: ignore[attr-defined]


def test_worlds_drawing_texts_at_once_draw_what_each_draws_alone() -> None:
    def texts(seed: int) -> list[str]:
        world = BaseWorld(rng=random.Random(seed), run_tag="r", check_tag="c")
        return [world.text("t") for _ in range(150)]

    alone = {seed: texts(seed) for seed in range(6)}
    together: dict[int, list[str]] = {}
    gate = threading.Barrier(6)

    def draw(seed: int) -> None:
        gate.wait()
        together[seed] = texts(seed)

    threads = [threading.Thread(target=draw, args=(seed,)) for seed in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch inside a draw, as checks waiting on processes do
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert together == alone
