"""The started target of one pytest process: a command line, its bounds and its claims."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field

from conformance.capabilities import CAPABILITIES as CLAIMS
from conformance.capabilities import Claims, settle
from conformance.errors import TargetError
from conformance.forked import ForkServer, available
from conformance.process import Launcher, run_command
from conformance.profile import CLI, MAX_BODY_BYTES, TIMEOUT, StartContext
from conformance.profiles.aidememo_local.remote import RemoteServer, start_server
from conformance.profiles.aidememo_local.settings import EMBEDDED

__all__ = ["LocalTarget", "start", "EMBEDDED", "INITIALIZE"]

# EMBEDDED, this kit's CLI, is forked from a warm interpreter (conformance.forked).
# What a command of it imports, so that no fork imports it again; the remote verbs' client too.
_PRELOAD = ("aidememo_cli.**", "aidememo_client.**", "hashlib", "locale")
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
    environ: dict[str, str] = field(default_factory=dict)  # every run's, unrecorded (see _bytecode_cache)
    launcher: Launcher | None = None  # None: each command a fresh process
    _server: RemoteServer | None = None
    _starting: threading.Lock = field(default_factory=threading.Lock)  # checks run in threads

    def remote_server(self) -> RemoteServer:
        """The reference server the remote checks talk to, started on first use."""
        with self._starting:
            if self._server is None:
                self._server = start_server()
            return self._server

    def close(self) -> None:
        if self.launcher is not None:
            self.launcher.close()
        if self._server is not None:
            self._server.close()
        shutil.rmtree(self.root, ignore_errors=True)


def start(context: StartContext) -> LocalTarget:
    settings = context.settings
    command: tuple[str, ...] | None = settings[CLI]
    root = tempfile.mkdtemp(prefix="aidememo-local-")
    target = LocalTarget(argv=command or EMBEDDED, root=root, timeout_s=settings[TIMEOUT],
                         max_output_bytes=settings[MAX_BODY_BYTES], environ={} if command else _bytecode_cache(root))
    if command is None and available():
        target.launcher = embedded_launcher(target.environ)

    def detect(name: str) -> tuple[bool, str]:
        if name == "remote":
            return _detect_remote(target)
        probe = f"{target.root}/probe.sqlite"
        try:
            done = run_command(None, [*target.argv, "--store", probe, "mcp"], stdin=(json.dumps(INITIALIZE) + "\n").encode(),
                               timeout_s=target.timeout_s, max_output_bytes=target.max_output_bytes,
                               unrecorded_env=target.environ, launcher=target.launcher)
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


def embedded_launcher(environ: dict[str, str]) -> ForkServer:
    """The kit's CLI as ``EMBEDDED`` runs it: ``aidememo_ref/__main__.py`` calling ``aidememo_cli.main``."""
    import importlib.util

    spec = importlib.util.find_spec("aidememo_ref.__main__")
    argv0 = spec.origin if spec is not None and spec.origin else "aidememo_ref"
    return ForkServer(EMBEDDED, "aidememo_cli:main", argv0, _PRELOAD, env={**os.environ, **environ})


def _bytecode_cache(root: str) -> dict[str, str]:
    """Variables giving the kit's own CLI a bytecode cache of this run, when the environment keeps none.

    A run starts the CLI about 150 times; with PYTHONDONTWRITEBYTECODE (as on these machines) each
    start compiled every module it imports again (``python bench/cli.py --no-bytecode-cache`` against
    ``python bench/cli.py`` gives the cost). A cache
    under the run's directory, filled by the first start, changes nothing the CLI answers and
    nothing outside the run; a command line given with --cli is run as given.
    """
    writes = not (os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.flags.dont_write_bytecode)
    if writes or os.environ.get("PYTHONPYCACHEPREFIX"):
        return {}
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": os.path.join(root, "pycache")}


def _detect_remote(target: LocalTarget) -> tuple[bool, str]:
    # `auth list` in an empty HOME: a CLI with credential profiles answers it (upstream prints that
    # none are stored); one without them refuses the word.
    home = tempfile.mkdtemp(prefix="probe-home-", dir=target.root)
    try:
        done = run_command(None, [*target.argv, "auth", "list"], env={"HOME": home}, timeout_s=target.timeout_s,
                           max_output_bytes=target.max_output_bytes, unrecorded_env=target.environ,
                           launcher=target.launcher)
    except TargetError as exc:
        return False, f"probe failed: {exc}"
    if done.exit_code != 0:
        return False, f"`auth list` exited {done.exit_code}"
    return True, "`auth list` answered in an empty HOME"
