"""scripts/demo-xmemo-handoff.sh: the seed's six steps between two agents, and that it catches a broken rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.checkout import sabotaged_checkout

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "demo-xmemo-handoff.sh"


def run(script: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("XMEMO")}
    environment |= {"PYTHON": sys.executable, "TMPDIR": str(tmp_path), **env}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=environment, cwd=tmp_path,
                          timeout=300)


def test_demo_plays_the_six_steps_and_prints_each_boundary_object(tmp_path: Path) -> None:
    done = run(SCRIPT, tmp_path, XMEMO_DEMO_KEEP="1")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(line.startswith(("OK: ", "  boundary [")) for line in lines), done.stdout
    assert lines[-1] == "OK: all steps passed"
    for step in ("1 Claude task_start", "2 Codex recall_context", "3 Claude record_decision", "4 Codex record_bug_fix",
                 "5 Codex task_end", "6 Claude recall_context (MCP): decision and fix both recalled"):
        assert any(line.startswith(f"OK: {step}") for line in lines), step
    objects = [json.loads(line.split(": ", 1)[1]) for line in lines if line.startswith("  boundary [")]
    assert len(objects) == 5  # one item at step 2, four at step 6
    for boundary in objects:
        assert list(boundary) == ["relation", "ownership", "current_agent_id", "current_agent_trust",
                                  "boundary_authority", "memory_agent_id", "explanation"]
    assert objects[0]["relation"] == "other_agent" and objects[0]["current_agent_id"] == "codex"
    (kept,) = tmp_path.glob("xmemo-demo.*")
    keys = [p.read_text().strip() for p in kept.glob("*.key")]
    assert len(keys) == 2 and all((p.stat().st_mode & 0o077) == 0 for p in kept.glob("*.key"))
    assert not any(k in done.stdout + done.stderr for k in keys)


def test_demo_names_the_step_when_a_boundary_rule_breaks(tmp_path: Path) -> None:
    copy = sabotaged_checkout(tmp_path, "xmemo_ref/_boundary.py", "    if memory.agent_id != caller.agent_id:\n")
    done = run(copy / "scripts" / "demo-xmemo-handoff.sh", tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "FAIL: 2 Codex recall_context: an item written by Claude is not other_agent for Codex"]
    assert "OK: 1 Claude task_start" in done.stdout
    assert not list(tmp_path.glob("xmemo-demo.*"))
