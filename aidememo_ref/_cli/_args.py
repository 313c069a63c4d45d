"""One argparse subclass for every ``aidememo-ref`` command: bad syntax raises ``UsageError``
(one line, no usage block, no traceback); each command line decides how to print it."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["Parser", "UsageError", "fail"]


class UsageError(Exception):
    """Bad command-line syntax, as one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def fail(message: str, *, code: int = 1) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)
