"""The started target of one pytest process: a command line, its bounds and its claims."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

from conformance.capabilities import CAPABILITIES as CLAIMS
from conformance.capabilities import Capability, Claims, settle
from conformance.errors import TargetError
from conformance.process import run_command
from conformance.profile import CLI, MAX_BODY_BYTES, TIMEOUT, StartContext

__all__ = ["LocalTarget", "start", "EMBEDDED"]

# This kit's CLI, run from the installed package.
EMBEDDED = (sys.executable, "-m", "aidememo_ref")


@dataclass(slots=True)
class LocalTarget:
    argv: tuple[str, ...]
    root: str  # holds every check's store directory
    timeout_s: float
    max_output_bytes: int
    claims: Claims = field(default_factory=Claims)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def start(context: StartContext) -> LocalTarget:
    settings = context.settings
    command: tuple[str, ...] | None = settings[CLI]
    target = LocalTarget(argv=command or EMBEDDED, root=tempfile.mkdtemp(prefix="aidememo-local-"),
                         timeout_s=settings[TIMEOUT], max_output_bytes=settings[MAX_BODY_BYTES])

    def detect(name: str) -> tuple[bool, str]:
        from conformance.profiles.aidememo_local.world import INITIALIZE

        probe = f"{target.root}/probe.sqlite"
        try:
            done = run_command(None, [*target.argv, "--store", probe, "mcp"], stdin=(json.dumps(INITIALIZE) + "\n").encode(),
                               timeout_s=target.timeout_s, max_output_bytes=target.max_output_bytes)
        except TargetError as exc:
            return False, f"probe failed: {exc}"
        try:
            version = json.loads(done.stdout.splitlines()[0])["result"]["protocolVersion"]
        except (ValueError, KeyError, IndexError, TypeError):
            return False, f"`mcp` did not answer initialize (exit {done.exit_code})"
        return True, f"`mcp` answered initialize with protocolVersion {version}"

    declared: dict[str, bool | None] = settings[CLAIMS]
    target.claims = settle(declared, _capabilities(), detect)
    return target


def _capabilities() -> tuple[Capability, ...]:
    from conformance.profiles.aidememo_local import CAPABILITIES

    return CAPABILITIES
