"""The newcomer's smoke: scripts/demo-agent-handoff.sh end to end (local store, then HTTP)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.checkout import sabotaged_checkout

from .conftest import REPO, _CLI_ENV


def test_demo_script_passes_every_step_and_never_prints_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    # A hostile caller environment must not leak into the demo.
    env |= {"PYTHON": sys.executable, "TMPDIR": str(tmp_path), "AIDEMEMO_DEMO_KEEP": "1",
            "AIDEMEMO_ACTOR_ID": "intruder", "AIDEMEMO_SOURCE_ID": "wrong-scope", "HERMES_KANBAN_BOARD": "b"}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo-agent-handoff.sh")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("OK: ") for line in lines), done.stdout
    assert lines[-1] == "OK: all steps passed"
    for step in ("workflow session", "has upstream's headings and lines", "session resume activated", "only codex-two sees",
                 "handoff run refused the manual profile", "return refused: result fact not attached",
                 "return refused: result fact carries another source_id", "return refused: result fact written by codex-one",
                 "identical return changed nothing", "board: returned lane", "reference server healthy",
                 "only codex-p2 sees it", "replayed return recovered"):
        assert any(step in line for line in lines), step
    (kept,) = tmp_path.glob("aidememo-demo.*")
    tokens = [p.read_text().strip() for p in kept.glob("*.token")]
    assert len(tokens) == 2 and all(len(t) > 20 for t in tokens)
    assert all((p.stat().st_mode & 0o077) == 0 for p in kept.glob("*.token"))
    assert not any(token in done.stdout + done.stderr for token in tokens)


def test_demo_names_the_step_when_the_flow_deviates(tmp_path: Path) -> None:
    # A sabotaged copy whose return no longer checks the author: the demo must catch it.
    copy = sabotaged_checkout(tmp_path, "aidememo_cli/_local/_rules.py", "    if fact.actor_id != actor:\n")
    env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    env |= {"PYTHON": sys.executable, "TMPDIR": str(tmp_path), "AIDEMEMO_DEMO_LOCAL_ONLY": "1"}
    done = subprocess.run(["bash", str(copy / "scripts" / "demo-agent-handoff.sh")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode != 0
    assert "FAIL: fail-closed return: not written by the receiver: was accepted but must be refused" in done.stderr
    assert "OK: return refused: result fact carries another source_id" in done.stdout  # earlier steps ran
    assert not list(tmp_path.glob("aidememo-demo.*"))  # the temporary store was cleaned up


def test_demo_takes_aidememo_bin_and_says_which_steps_another_cli_skips(tmp_path: Path) -> None:
    # Another `aidememo` (here the kit behind a wrapper that has no `shim` command, as upstream's
    # has none): upstream's steps run against it, the kit-only ones are announced, not passed.
    wrapper = tmp_path / "aidememo"
    wrapper.write_text(f"""#!/bin/sh
[ "$1" = shim ] && exit 2
exec {sys.executable} -c 'import sys; from aidememo_cli import main; sys.exit(main(sys.argv[1:]))' "$@"
""")
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    env |= {"PYTHON": sys.executable, "TMPDIR": str(tmp_path), "AIDEMEMO_BIN": str(wrapper),
            "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", str(REPO / "scripts" / "demo-agent-handoff.sh")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "SKIP (kit only): the command adapter and built-in runner are aidememo-ref's; upstream delegates to" \
           " aidememo-worker-lane" in lines
    assert "SKIP (kit only): the remote half provisions the kit's reference server" in lines
    assert lines[-1] == "OK: local protocol smoke passed (remote half skipped)"
    assert any("has upstream's headings and lines" in line for line in lines)
