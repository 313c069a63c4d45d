"""scripts/demo-remote-handoff.sh: the guide's two-account example, end to end, as CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.checkout import sabotaged_checkout

REPO = Path(__file__).resolve().parents[2]
_LEAKY = {"AIDEMEMO_ACTOR_ID": "intruder", "AIDEMEMO_SOURCE_ID": "wrong-scope", "AIDEMEMO_REMOTE_PROFILE": "nobody",
          "AIDEMEMO_SESSION_ID": "session-elsewhere"}


def _run(script: Path, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "HERMES_"))}
    env |= {"PYTHON": sys.executable, "TMPDIR": str(tmp_path), **_LEAKY, **extra}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_the_remote_demo_passes_every_step_and_never_prints_a_token(tmp_path: Path) -> None:
    done = _run(REPO / "scripts" / "demo-remote-handoff.sh", tmp_path, AIDEMEMO_DEMO_KEEP="1")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("OK: ") for line in lines), done.stdout
    assert lines[-1] == "OK: all steps passed" and len(lines) == 14
    for step in ("two named profiles share one URL", "routed the session to the server", "still one handoff",
                 "--actor-id is refused", "now live in ./codex-p2.sqlite", "recovered: true, no new transition",
                 "the replay recovered", "outbox shows", "refuses codex-p2 and answers with the server stopped"):
        assert any(step in line for line in lines), step
    (kept,) = tmp_path.glob("aidememo-remote-demo.*")
    tokens = list((kept / "home" / ".config" / "aidememo").glob("*.token"))
    assert len(tokens) == 2 and all((p.stat().st_mode & 0o077) == 0 for p in tokens)
    secrets = [p.read_text().strip() for p in tokens]
    assert all(len(s) == 64 for s in secrets)
    assert not any(secret in done.stdout + done.stderr for secret in secrets)
    assert not any(secret in (kept / "server.out").read_text() for secret in secrets)


def test_the_demo_names_the_step_when_recovery_breaks(tmp_path: Path) -> None:
    # A sabotaged copy whose accept never recognises its own applied claim.
    held = '''    elif (state, outcome) in (("accepted", None), ("completed", "succeeded")):
        attempt, recovered = attempts, True'''
    copy = sabotaged_checkout(tmp_path, "aidememo_client/recovery.py", held,
                              held.replace("recovered = attempts, True", "recovered = attempts, False"))
    done = _run(copy / "scripts" / "demo-remote-handoff.sh", tmp_path)
    assert done.returncode != 0
    assert "FAIL: accept rerun: " in done.stderr  # the resent accept is a command_id conflict
    assert "OK: codex-p2 claimed" in done.stdout
    assert not list(tmp_path.glob("aidememo-remote-demo.*"))  # cleaned up, server stopped
