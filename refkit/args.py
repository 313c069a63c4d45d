"""One argparse subclass for every ``aidememo-ref`` command: bad syntax raises ``UsageError``
(one line, no usage block, no traceback); each command line decides how to print it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

__all__ = ["Parser", "UsageError", "fail"]


class UsageError(Exception):
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


def fail(message: str, *, code: int = 1) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)
