"""Commands of a Python CLI forked from a warm interpreter, one process each.

The aidememo-local profile runs this kit's own CLI about 150 times a run. Started fresh, most of
each command was the interpreter's start (``site`` and the CLI's imports: ``python bench/cli.py
--local-profile`` times a profile run against as many bare interpreter starts); forked from a server
that imported the CLI once, a command costs its fork and its work. Each command is still a process of its own, running beside the others: its
own argv, environment, working directory, stdin, stdout, stderr and exit status (``waitpid``'s,
signals included). It shares with its siblings only what the server imported before forking (and
so the hash seed), and, as with ``os._exit``, no ``atexit`` handler runs (the kit's CLI registers
none). A command line given with ``--cli`` is always started fresh.

Why a server of our own: forking the pytest process itself could deadlock a child on a lock one of
its threads held, so the server is a separate, single-threaded interpreter. The standard library's
``multiprocessing`` forkserver was the first choice; it re-imports the parent's ``__main__`` (pytest)
in every child, which is most of the cost this removes. The server gets each command over a
``SOCK_SEQPACKET`` pair, with its three stdio descriptors and a status socket (``SCM_RIGHTS``); it
forks a supervisor, which forks the command, sends its pid, waits for it and sends its exit status.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import pkgutil
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ForkServer", "ForkedProcess", "available"]

_MAX_REQUEST = 1 << 20  # an environment of a megabyte is already absurd


def available() -> bool:
    """Whether this platform can fork and pass descriptors over a sequenced-packet socket."""
    return hasattr(os, "fork") and hasattr(socket, "SOCK_SEQPACKET") and hasattr(socket, "send_fds")


class _Input:
    """The parent's end of a command's stdin: written once, then closed (its EOF)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def write(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except ConnectionResetError as exc:  # what a pipe calls a broken pipe
            raise BrokenPipeError(str(exc)) from exc

    def close(self) -> None:
        self._sock.close()


class _Output:
    """The parent's end of a command's stdout or stderr."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, size: int) -> bytes:
        try:
            return self._sock.recv(size)
        except OSError:  # closed under a reader: as if at its end
            return b""

    def close(self) -> None:
        self._sock.close()


class ForkedProcess:
    """A forked command, with the part of ``subprocess.Popen`` that ``run_command`` uses."""

    def __init__(self, status: socket.socket, stdin: socket.socket, stdout: socket.socket,
                 stderr: socket.socket) -> None:
        self.stdin = _Input(stdin)
        self.stdout = _Output(stdout)
        self.stderr = _Output(stderr)
        self.returncode: int | None = None
        self._status = status
        self._lines: list[bytes] = []
        self._partial = b""
        pid = self._line(timeout=30.0)
        if pid is None:
            self._close_all()
            raise OSError("the fork server did not start the command")
        self.pid = int(pid)

    def _line(self, timeout: float | None) -> bytes | None:
        """The next line the supervisor sent; None if none came in ``timeout`` or it is gone."""
        while not self._lines:
            ready, _, _ = select.select([self._status], [], [], timeout)
            if not ready:
                return None
            chunk = self._status.recv(64)
            if not chunk:
                return None
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            self._lines.extend(complete)
        return self._lines.pop(0)

    def poll(self) -> int | None:
        return self.wait(timeout=0.0)

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status (negative: the signal that ended it), or None while it runs."""
        if self.returncode is None:
            line = self._line(timeout)
            if line is not None:
                self.returncode = int(line)
                self._status.close()
            elif self._status.fileno() != -1 and _closed(self._status):
                # The supervisor died before telling: nothing can say how the command ended.
                self.returncode = -signal.SIGKILL
                self._status.close()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _close_all(self) -> None:
        self._status.close()
        self.stdin.close()
        self.stdout.close()
        self.stderr.close()


def _closed(sock: socket.socket) -> bool:
    ready, _, _ = select.select([sock], [], [], 0)
    if not ready:
        return False
    return sock.recv(1, socket.MSG_PEEK) == b""


class ForkServer:
    """A warm interpreter standing for ``prefix`` (e.g. ``python -m aidememo_ref``).

    ``entry`` ("module:function") is what the command line would run, with ``sys.argv`` set to
    ``[argv0, *rest]``; ``preload`` names modules the server imports before its first fork (a name
    ending in ``.**`` also imports every submodule of that package, ``__main__`` modules excepted).
    Started on first use; ``env`` is the server's own environment (the parent's when None).
    """

    def __init__(self, prefix: Sequence[str], entry: str, argv0: str, preload: Sequence[str],
                 env: Mapping[str, str] | None = None) -> None:
        self.prefix = tuple(prefix)
        self._entry = entry
        self._argv0 = argv0
        self._preload = list(preload)
        self._env = dict(env) if env is not None else None
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._server: subprocess.Popen[bytes] | None = None

    def start(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None) -> ForkedProcess:
        """Start ``argv`` (which begins with ``prefix``) with exactly ``env`` as its environment.

        Raises:
            ValueError: ``argv`` is not this server's command line.
            OSError: the server cannot be started or reached.
        """
        if tuple(argv[:len(self.prefix)]) != self.prefix:
            raise ValueError(f"{' '.join(argv)} is not a command of {' '.join(self.prefix)}")
        request = json.dumps({"entry": self._entry, "argv": [self._argv0, *argv[len(self.prefix):]],
                              "env": dict(env), "cwd": cwd or os.getcwd()}).encode()
        if len(request) > _MAX_REQUEST:
            raise OSError(f"the command's environment and arguments exceed {_MAX_REQUEST} bytes")
        pairs = [socket.socketpair() for _ in range(4)]  # stdin, stdout, stderr, status
        try:
            with self._lock:
                control = self._running()
                socket.send_fds(control, [request], [child.fileno() for _, child in pairs])
        except OSError:
            for ours, theirs in pairs:
                ours.close()
                theirs.close()
            raise
        for _, child in pairs:
            child.close()
        (stdin, _), (stdout, _), (stderr, _), (status, _) = pairs
        return ForkedProcess(status, stdin, stdout, stderr)

    def _running(self) -> socket.socket:
        if self._control is not None and self._server is not None and self._server.poll() is None:
            return self._control
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = "import sys; from conformance.forked import _serve; _serve(int(sys.argv[1]), sys.argv[2:])"
        try:
            self._server = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno()), *self._preload],
                                            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, env=self._env)
        finally:
            theirs.close()
        self._control = ours
        return ours

    def close(self) -> None:
        """Stop the server (commands already running run on)."""
        if self._control is not None:
            self._control.close()  # its end reads EOF and it exits
            self._control = None
        if self._server is not None:
            try:
                self._server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
            self._server = None


# -- the server's side --------------------------------------------------------------------------

def _serve(fd: int, preload: Sequence[str]) -> None:
    control = socket.socket(fileno=fd)
    for name in preload:
        _import(name)
    # Reaped here, not by the kernel, so that the commands' CPU time reaches the parent's
    # RUSAGE_CHILDREN when it waits for this server (bench/suite.py reads it).
    signal.signal(signal.SIGCHLD, _reap)
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(control, _MAX_REQUEST, 4)
        except OSError:
            message, fds = b"", []
        if not message:  # the parent closed its end, or died
            _wait_for_supervisors()
            return
        if len(fds) != 4:
            for descriptor in fds:
                os.close(descriptor)
            continue
        if os.fork() == 0:
            try:
                control.close()
                _supervise(json.loads(message), fds)
            finally:
                os._exit(0)
        for descriptor in fds:
            os.close(descriptor)


def _reap(_signal: int, _frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_for_supervisors() -> None:
    """Wait for the supervisors still sending a status: one reaped by nobody takes its command's
    CPU time out of the parent's account."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _import(name: str) -> None:
    walk = name.endswith(".**")
    module = importlib.import_module(name[:-3] if walk else name)
    if walk:
        for found in pkgutil.walk_packages(module.__path__, module.__name__ + "."):
            if found.name.rsplit(".", 1)[-1] != "__main__":
                importlib.import_module(found.name)


def _supervise(request: dict[str, Any], fds: list[int]) -> None:
    stdin, stdout, stderr, status = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # so that waitpid sees the command end
    pid = os.fork()
    if pid == 0:
        os.close(status)
        _command(request, stdin, stdout, stderr)
    for descriptor in (stdin, stdout, stderr):
        os.close(descriptor)
    os.write(status, f"{pid}\n".encode())
    _, code = os.waitpid(pid, 0)
    os.write(status, f"{os.waitstatus_to_exitcode(code)}\n".encode())


def _command(request: dict[str, Any], stdin: int, stdout: int, stderr: int) -> None:
    """Become the command (never returns)."""
    code = 1
    try:
        for target, descriptor in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(descriptor, target)
        for descriptor in {stdin, stdout, stderr} - {0, 1, 2}:
            os.close(descriptor)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = _text(0, "r", sys.__stdin__, line_buffering=False)
        sys.stdout = _text(1, "w", sys.__stdout__, line_buffering=False)
        sys.stderr = _text(2, "w", sys.__stderr__, line_buffering=True, errors="backslashreplace")
        sys.argv = list(request["argv"])
        module, _, function = request["entry"].partition(":")
        code = _exit_code(getattr(importlib.import_module(module), function)())
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
    finally:
        for thread in threading.enumerate():  # as interpreter shutdown waits for them
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _text(fd: int, mode: str, like: Any, *, line_buffering: bool, errors: str | None = None) -> io.TextIOWrapper:
    """A standard stream on ``fd`` with the encoding the interpreter gave the server's own."""
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: io.BufferedReader | io.BufferedWriter = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    encoding = getattr(like, "encoding", None) or "utf-8"
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors or getattr(like, "errors", None) or "strict",
                            line_buffering=line_buffering)


def _exit_code(value: object) -> int:
    """What ``raise SystemExit(value)`` exits with (a non-integer is printed, as Python does)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        print(value, file=sys.stderr)
    except (OSError, ValueError):
        pass
    return 1
