"""What a bench figure was taken under: the load average at its start and end, and bytecode caching.

These machines have 2 cores shared with other work, so an absolute figure moves with the load;
a figure taken while the 1-minute load average was above ``LOADED`` (at its start or its end) is
marked as such, and only an unmarked one may be quoted as a quiet machine's. Bytecode matters to
every figure that starts an interpreter: ``PYTHONDONTWRITEBYTECODE`` is set here by default, so
each start compiles the kit's modules unless a cache was filled some other way.

A script opens with ``opening()`` (the conditions at its start, printed once), takes a
``Window()`` before each measurement and prints ``window.mark(line)`` for each figure it took,
and ends with ``closing()``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Final

__all__ = ["LOADED", "Window", "bytecode", "closing", "load", "mark", "opening"]

LOADED: Final = 1.0  # 1-minute load average above which a figure on this 2-core machine is marked
_KIT: Final = ("aidememo_ref", "aidememo_wire", "conformance", "refkit", "simulations", "xmemo_ref")


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def bytecode() -> str:
    """Whether this process's kit modules were read from cached bytecode, and whether it writes any."""
    writes = not (sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE"))
    modules = [module for name, module in list(sys.modules.items())
               if name.partition(".")[0] in _KIT and getattr(module, "__file__", None)]
    cached = sum(1 for module in modules if _cache_exists(str(module.__file__)))
    how = "written" if writes else "not written (PYTHONDONTWRITEBYTECODE set)"
    if not modules:
        return f"bytecode {how}"
    if cached == len(modules):
        return f"bytecode cached ({len(modules)} kit modules had a .pyc), {how}"
    return f"bytecode not cached ({cached} of {len(modules)} kit modules had a .pyc), {how}"


def _cache_exists(source: str) -> bool:
    if not source.endswith(".py"):
        return False
    try:
        return os.path.exists(importlib.util.cache_from_source(source))
    except (NotImplementedError, ValueError):
        return False


def opening(what: str = "") -> float:
    """Print the conditions at the script's start; returns the load average then."""
    one, five, fifteen = os.getloadavg()
    print(f"conditions{' of ' + what if what else ''}: load average {one:.2f} {five:.2f} {fifteen:.2f} "
          f"(1, 5, 15 min) at start on {os.cpu_count()} CPUs; {bytecode()}; a figure taken at load > "
          f"{LOADED:g} is marked 'LOADED'", flush=True)
    return one


def closing() -> None:
    """Print the load average at the script's end."""
    one, five, fifteen = os.getloadavg()
    print(f"conditions: load average {one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min) at end", flush=True)


class Window:
    """One measurement's span: the load average when it began, and the mark of a figure it gave."""

    __slots__ = ("began",)

    def __init__(self) -> None:
        self.began = load()

    def mark(self, line: str) -> str:
        """``line`` with the load at the window's start and now, marked when either is above ``LOADED``."""
        return mark(line, self.began, load())


def mark(line: str, began: float, ended: float) -> str:
    """``line`` with the two load averages beside it, marked 'LOADED' when either is above ``LOADED``."""
    flag = f" LOADED (load > {LOADED:g}: not a quiet machine's figure)" if max(began, ended) > LOADED else ""
    return f"{line} | load {began:.2f} -> {ended:.2f}{flag}"
