"""``aidememo-ref serve`` (or ``xmemo serve``) in a child process: start it, wait until it answers, stop or kill it.

For tests, benchmarks and campaigns that need a real server process (a socket, a process to
kill, several processes on one database) rather than ``serve_in_thread``::

    with ReferenceProcess.start("ledger.sqlite", test_clock=True) as server:
        httpx.get(f"{server.url}/health")

The server binds a free loopback port; ``start`` returns once it printed its URL line and
``/health`` answered, or raises ``ServerStartError`` with the server's own first words.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from refkit.errors import RefkitError

__all__ = ["ReferenceProcess", "ServerStartError"]

_READY_TIMEOUT_S = 15.0


class ServerStartError(RefkitError, RuntimeError):
    """The server process exited or did not answer ``/health`` in time."""


class ReferenceProcess:
    """One running ``aidememo-ref serve`` process (use ``start``)."""

    def __init__(self, process: subprocess.Popen[str], url: str, stderr: IO[bytes]) -> None:
        self.process = process
        self.url = url
        self._stderr = stderr
        hostport = url.removeprefix("http://")
        host, _, port = hostport.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)

    @classmethod
    def start(
        cls,
        database: str | Path | None,
        *,
        postgres_url: str | None = None,
        test_clock: bool = False,
        bind: str = "127.0.0.1:0",
        extra_args: Sequence[str] = (),
        ready_timeout_s: float = _READY_TIMEOUT_S,
        command: Sequence[str] = ("serve",),
    ) -> ReferenceProcess:
        """Start ``python -m aidememo_ref serve`` on ``database`` and wait until it answers.

        Args:
            postgres_url: serve this PostgreSQL database instead (``database`` None); it is passed
                through the environment, as ``serve`` reads it, never on the command line.
            test_clock: serve the ``/__test__/clock`` extension.
            bind: ``IP:PORT``; port 0 picks a free one.
            extra_args: more ``serve`` flags.
            command: the serving subcommand: ``("serve",)``, or ``("xmemo", "serve")`` for the XMemo reference.

        Its stderr goes to a temporary file (a pipe nobody reads could fill and stall it);
        ``stderr_text()`` reads it.
        """
        storage = ["--database", str(database)] if postgres_url is None else [
            "--canonical-backend", "postgres", "--postgres-transport", "insecure-no-tls", "--artifact-backend", "disabled"]
        env = None if postgres_url is None else {**os.environ, "AIDEMEMO_POSTGRES_URL": postgres_url}
        args = [sys.executable, "-m", "aidememo_ref", *command, *storage, "--bind", bind,
                *(["--test-clock"] if test_clock else []), *extra_args]
        stderr = tempfile.TemporaryFile()
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        assert process.stdout is not None
        line = process.stdout.readline()
        if "serving" not in line:
            process.kill()
            process.wait(timeout=15)
            stderr.seek(0)
            said = (line.strip() or stderr.read().decode("utf-8", "replace").strip() or "no output").splitlines()
            stderr.close()
            process.stdout.close()
            raise ServerStartError(f"aidememo-ref serve did not start: {said[-1]}")
        server = cls(process, next(word for word in line.split() if word.startswith("http")), stderr)
        server._wait_ready(ready_timeout_s)
        return server

    def stderr_text(self) -> str:
        """What the server wrote to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def _wait_ready(self, timeout_s: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(f"aidememo-ref serve exited with status {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.02)
        self.kill()
        raise ServerStartError(f"aidememo-ref serve at {self.url} never answered /health")

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 15.0) -> int:
        """Send ``sig`` (a clean stop) and return the exit status; SIGKILL if it outlives the timeout."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode
        finally:
            self._close_pipes()

    def kill(self) -> None:
        """SIGKILL: the crash a durability campaign needs."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=15)
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> ReferenceProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        self._stderr.close()
