"""Bounded runs of a target's command line, for profiles whose target is a CLI, not a URL.

``run_command`` starts one process with extra environment, optional stdin, an overall deadline
and a bound on what is read of stdout and stderr (beyond it the process is killed), and records
a ``CommandExchange`` on the check's transcript. A command that cannot start, outlives its
deadline or floods its output raises ``TargetError``, the same verdict as a hanging server.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from conformance.answers import parse
from conformance.errors import TargetError
from conformance.transcript import Transcript, kept, shown_text

__all__ = ["CommandExchange", "Launcher", "run_command"]


class Launcher(Protocol):
    """Another way to start a command line (``conformance.forked.ForkServer``): it returns an
    object with the part of ``subprocess.Popen`` used here, whose ``wait`` takes a timeout and
    returns None while the command runs."""

    def start(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None) -> Any: ...

    def close(self) -> None:
        """Stop whatever it keeps running between commands."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandExchange:
    """One command run and what it printed (``exit_code`` None when it never finished)."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # only the variables the check set
    stdin: bytes
    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None
    truncated: bool = False
    elapsed_s: float = 0.0
    actor: str | None = None
    expected: list[str] = field(default_factory=list, compare=False, repr=False)  # as on ``Exchange``
    sizes: tuple[int | None, int | None, int | None] = (None, None, None)  # stdin, stdout, stderr once settled
    # The concurrency group the command ran in (``conformance.race.next_group``), for reproductions.
    group: list[int] = field(default_factory=list, compare=False, repr=False)

    @property
    def answered(self) -> bool:
        return self.exit_code is not None

    def expect(self, what: str) -> str:
        """Note what the check expects of this run ("exit 0 with JSON"); returns ``what``."""
        if what not in self.expected:
            self.expected.append(what)
        return what

    def text(self) -> str:
        """stdout as UTF-8 (replacing undecodable bytes)."""
        return self.stdout.decode("utf-8", "replace")

    def json(self) -> Any:
        """stdout as JSON, read through ``conformance.answers`` (what is not there raises ``ShapeError``)."""
        return parse(self.stdout, f"`{' '.join(self.argv)}` exited {self.exit_code}", self)

    def settled(self) -> CommandExchange:
        """This run as its report shows it: stdin, stdout and stderr each cut at ``SHOWN_BYTES``, with their lengths."""
        streams = [kept(raw, size) for raw, size in zip((self.stdin, self.stdout, self.stderr), self.sizes)]
        sizes = (streams[0][1], streams[1][1], streams[2][1])
        if sizes == self.sizes:
            return self
        return replace(self, stdin=streams[0][0], stdout=streams[1][0], stderr=streams[2][0], sizes=sizes)

    def to_dict(self) -> dict[str, object]:
        stdin, stdout, stderr = (shown_text(raw, size) for raw, size in
                                 zip((self.stdin, self.stdout, self.stderr), self.sizes))
        ended = f"exit {self.exit_code}" if self.exit_code is not None else f"no exit ({self.error})"
        line = " ".join(self.argv)
        return {
            "kind": "command",
            "summary": f"$ {line} -> {ended}",
            "request": "".join(f"{k}={v} " for k, v in self.env) + line + (
                f"\n<stdin>\n{stdin}" if self.stdin else ""),
            "response": f"{ended} after {self.elapsed_s:.2f} s\n<stdout>\n{stdout}\n"
                        f"<stderr>\n{stderr}" + (" [truncated by the size bound]" if self.truncated else ""),
            "argv": list(self.argv),
            "env": dict(self.env),
            "stdin": stdin,
            "exit_code": self.exit_code,
            "stdout": stdout,
            "stderr": stderr,
            "error": self.error,
            "actor": self.actor,
            "expected": "; ".join(self.expected),
            **({"group": self.group[0]} if self.group else {}),
        }


def _drain(stream: object, sink: list[bytes], limit: int, over: threading.Event) -> None:
    size = 0
    read = getattr(stream, "read1", None) or getattr(stream, "read")
    while True:
        chunk = read(65536)
        if not chunk:
            return
        size += len(chunk)
        if size > limit:
            over.set()
            return
        sink.append(chunk)


def _feed_and_wait(process: Any, stdin: bytes, deadline: float, over: threading.Event, *, exact: bool,
                   bounds: tuple[float, int]) -> str | None:
    """Write stdin, then wait for the exit; what broke a bound (the process still runs), or None."""
    if process.stdin is not None:
        try:
            process.stdin.write(stdin)
            process.stdin.close()
        except BrokenPipeError:
            pass  # it exited without reading its input; what it printed still counts
    while process.poll() is None:
        if over.is_set():
            return f"printed more than {bounds[1]} bytes"
        if time.perf_counter() > deadline:
            return f"did not finish within the {bounds[0]:g} s deadline"
        if exact:
            process.wait(timeout=0.05)  # a launcher's wait returns at the exit, not at the next tick
        else:
            time.sleep(0.005)
    return None


def run_command(
    transcript: Transcript | None,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: bytes = b"",
    timeout_s: float,
    max_output_bytes: int,
    cwd: str | None = None,
    actor: str | None = None,
    unrecorded_env: Mapping[str, str] | None = None,
    launcher: Launcher | None = None,
) -> CommandExchange:
    """Run one command within the bounds and record it.

    ``env`` is what the check sets and the transcript shows; ``unrecorded_env`` is the kit's own
    plumbing that changes nothing the command answers (a bytecode cache), so it is left out.
    ``launcher`` starts the command instead of ``subprocess`` (same argv, environment and bounds).

    Raises:
        TargetError: it could not start, outlived ``timeout_s`` or printed more than the bound.
    """
    extra = dict(env or {})
    started = time.perf_counter()
    exchange_of = partial(CommandExchange, argv=tuple(argv), env=tuple(extra.items()), stdin=stdin, actor=actor)
    environment = {**os.environ, **(unrecorded_env or {}), **extra}
    process: Any
    try:
        if launcher is not None:
            process = launcher.start(argv, env=environment, cwd=cwd)
        else:
            process = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=environment, cwd=cwd)
    except OSError as exc:
        exchange = exchange_of(exit_code=None, error=f"cannot start: {exc.strerror or exc}")
        if transcript is not None:
            transcript.record(exchange)
        raise TargetError(f"{argv[0]}: {exchange.error}") from exc
    out: list[bytes] = []
    err: list[bytes] = []
    over = threading.Event()
    readers = [threading.Thread(target=_drain, args=(process.stdout, out, max_output_bytes, over), daemon=True),
               threading.Thread(target=_drain, args=(process.stderr, err, max_output_bytes, over), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        error = _feed_and_wait(process, stdin, started + timeout_s, over, exact=launcher is not None,
                               bounds=(timeout_s, max_output_bytes))
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for reader in readers:
            reader.join(timeout=1.0)
        if not any(reader.is_alive() for reader in readers):  # one still reading keeps its stream
            for stream in (process.stdout, process.stderr):
                stream.close()
    if over.is_set() and error is None:
        error = f"printed more than {max_output_bytes} bytes"
    exchange = exchange_of(exit_code=None if error else process.returncode, stdout=b"".join(out),
                           stderr=b"".join(err), error=error, truncated=over.is_set(),
                           elapsed_s=time.perf_counter() - started)
    if transcript is not None:
        transcript.record(exchange)
    if error is not None:
        raise TargetError(f"{' '.join(argv)}: {error}")
    return exchange
