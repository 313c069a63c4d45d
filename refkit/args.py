"""What every ``aidememo-ref`` command line shares: one argparse subclass whose bad syntax raises
``UsageError`` (one line, no usage block, no traceback; each command line decides how to print
it), the one-line ``error:`` exit, SIGTERM handled as SIGINT, and the secret files (token, key) read
with their mode rules."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

from refkit.errors import RefkitError

__all__ = ["Parser", "UsageError", "fail", "reader_gone", "read_token_file", "sigterm_as_interrupt"]


class UsageError(RefkitError):
    """Bad command-line syntax, as one line."""


def _columns() -> int:
    """``shutil.get_terminal_size().columns``: ``$COLUMNS``, else the terminal, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (ValueError, OSError):  # closed, detached or not a terminal
            columns = 0
    return columns if columns > 0 else 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized without ``shutil``: argparse builds one for every
    ``add_argument`` (to check the metavar), and the stock one imports ``shutil`` (with bz2, lzma
    and locale) for the width, a few milliseconds of every start of a command line agents call
    dozens of times."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def reader_gone() -> int:
    """After a ``BrokenPipeError`` on stdout (the reader went away, as ``| head`` does): point
    stdout at the null device so the exit flush cannot fail again, and return 141 (a shell's
    status for SIGPIPE)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM (a cancelled CI job, ``kill``) raises ``KeyboardInterrupt`` in the main
    thread as SIGINT does, so the same cleanup runs: token files, temporary databases, child
    servers. A second SIGTERM ends the process at once (the cleanup may be what hangs). Outside
    the main thread, where no handler can be installed, it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import signal  # here: 3M instructions of every start of a command line that never installs a handler

    def interrupt(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def fail(message: str, *, code: int = 1) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)


def read_token_file(path: str, *, label: str = "token file") -> str:
    """The secret in ``path`` (trailing CR/LF stripped); ``label`` names the file in errors."""
    try:
        info = os.stat(path)
    except OSError as exc:
        fail(f"cannot read {label} {path}: {exc.strerror}")
    if not stat.S_ISREG(info.st_mode):
        fail(f"{label} {path} is not a regular file")
    if info.st_mode & 0o077:
        fail(f"{label} {path} must not be readable by group or others (chmod 600)")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(8192)
    except OSError as exc:
        fail(f"cannot read {label} {path}: {exc.strerror}")
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        fail(f"{label} {path} is not UTF-8")
