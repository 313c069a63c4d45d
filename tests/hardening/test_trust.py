"""Files the kit reads are data: a replay file that names a factory or a target file runs neither.

A replay file is made to be shared (``sim-failures/`` bundles attached to bug reports), so one
crafted to name ``evil.py:factory`` or a target file whose provisioning command writes a marker
must leave the marker unwritten: the kit prints the command that names them and exits 2. Named
on the command line, the same factory runs (the file is still the user's to trust).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from simulations.plan import Plan
from simulations.xmemo.replay import FORMAT as XMEMO_FORMAT
from tests.targetfile import write_target

MARKER = "PWNED"


def _evil_factory(tmp_path: Path) -> Path:
    evil = tmp_path / "evil.py"
    marker = tmp_path / MARKER
    evil.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
                    "from simulations.targets import reference_factory as factory\n")
    return evil


def _sim(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulations.cli", *argv], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def _plan(actors: tuple[str, ...] = ("agent-a", "agent-b")) -> dict[str, object]:
    return Plan(actors=actors, workers=actors, batches=()).to_json()


def _replay_file(tmp_path: Path, target: dict[str, object], fmt: str = "aidememo-sim-replay/1") -> Path:
    path = tmp_path / "shared-race.json"
    path.write_text(json.dumps({"format": fmt, "seed": 7, "target": target, "plan": _plan(), "schedule": [],
                                "history": [], "verdict": "illegal", "finding": None}))
    return path


def test_a_replay_file_naming_a_factory_imports_nothing(tmp_path: Path) -> None:
    evil = _evil_factory(tmp_path)
    replay = _replay_file(tmp_path, {"kind": "embedded", "factory": f"{evil}:factory"})
    done = _sim("replay", str(replay), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (tmp_path / MARKER).exists(), "the replay file's factory was imported"
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"aidememo-sim replay {replay} --ledger {evil}:factory" in done.stderr
    # Named on the command line, it runs: the user chose it.
    named = _sim("replay", str(replay), "--ledger", f"{evil}:factory", cwd=tmp_path)
    assert named.returncode == 0, named.stdout + named.stderr
    assert (tmp_path / MARKER).exists()


def test_a_replay_file_naming_a_target_file_provisions_nothing(tmp_path: Path) -> None:
    marker = tmp_path / MARKER
    config = tmp_path / "target.toml"
    write_target(config, "http://127.0.0.1:9", provision={"command": f"touch {marker} # {{project}} {{actor}} {{token_file}}"})
    replay = _replay_file(tmp_path, {"kind": "url", "url": "http://127.0.0.1:9", "config": str(config),
                                     "project": "p", "factory": None})
    done = _sim("replay", str(replay), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert not marker.exists(), "the replay file's provisioning command ran"
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"aidememo-sim replay {replay} --config {config}" in done.stderr


def test_an_xmemo_replay_file_naming_a_factory_imports_nothing(tmp_path: Path) -> None:
    evil = _evil_factory(tmp_path)
    replay = _replay_file(tmp_path, {"kind": "embedded", "factory": f"{evil}:factory"}, fmt=XMEMO_FORMAT)
    done = _sim("replay", str(replay), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (tmp_path / MARKER).exists(), "the XMemo replay file's factory was imported"
    assert f"--ledger {evil}:factory" in done.stderr and "Traceback" not in done.stderr


def test_a_replay_file_with_wrongly_typed_fields_is_bad_input(tmp_path: Path) -> None:
    for target in ({"kind": "embedded", "factory": ["x"]}, {"kind": "url", "config": 5, "url": "u"}):
        replay = _replay_file(tmp_path, target)
        done = _sim("replay", str(replay), cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
