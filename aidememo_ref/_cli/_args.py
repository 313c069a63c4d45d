"""argparse with one-line errors: bad input never prints a traceback or a usage block."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["Parser", "fail"]


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(f"{self.prog}: {message}", code=2)


def fail(message: str, *, code: int = 1) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)
