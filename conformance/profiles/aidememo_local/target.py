"""The started target of one pytest process: a command line, its bounds and its claims."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from conformance.capabilities import CAPABILITIES as CLAIMS
from conformance.capabilities import Claims, settle
from conformance.errors import TargetError
from conformance.process import run_command
from conformance.profile import CLI, MAX_BODY_BYTES, TIMEOUT, StartContext
from conformance.profiles.aidememo_local.remote import RemoteServer, start_server

__all__ = ["LocalTarget", "start", "EMBEDDED", "INITIALIZE"]

# This kit's CLI, run from the installed package.
EMBEDDED = (sys.executable, "-m", "aidememo_ref")
# What upstream's SDK sends first to an ``mcp`` server; the ``mcp`` capability is detected with it.
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"clientInfo": {"name": "aidememo-conformance", "version": "0"}}}


@dataclass(slots=True)
class LocalTarget:
    argv: tuple[str, ...]
    root: str  # holds every check's store directory
    timeout_s: float
    max_output_bytes: int
    claims: Claims = field(default_factory=Claims)
    _server: RemoteServer | None = None

    def remote_server(self) -> RemoteServer:
        """The reference server the remote checks talk to, started on first use."""
        if self._server is None:
            self._server = start_server()
        return self._server

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        shutil.rmtree(self.root, ignore_errors=True)


def start(context: StartContext) -> LocalTarget:
    settings = context.settings
    command: tuple[str, ...] | None = settings[CLI]
    target = LocalTarget(argv=command or EMBEDDED, root=tempfile.mkdtemp(prefix="aidememo-local-"),
                         timeout_s=settings[TIMEOUT], max_output_bytes=settings[MAX_BODY_BYTES])

    def detect(name: str) -> tuple[bool, str]:
        if name == "remote":
            return _detect_remote(target)
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
    target.claims = settle(declared, context.capabilities, detect)
    return target


def _detect_remote(target: LocalTarget) -> tuple[bool, str]:
    # `auth list` in an empty HOME: a CLI with credential profiles answers it (upstream prints that
    # none are stored); one without them refuses the word.
    home = tempfile.mkdtemp(prefix="probe-home-", dir=target.root)
    try:
        done = run_command(None, [*target.argv, "auth", "list"], env={"HOME": home}, timeout_s=target.timeout_s,
                           max_output_bytes=target.max_output_bytes)
    except TargetError as exc:
        return False, f"probe failed: {exc}"
    if done.exit_code != 0:
        return False, f"`auth list` exited {done.exit_code}"
    return True, "`auth list` answered in an empty HOME"
