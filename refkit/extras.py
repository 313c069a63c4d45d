"""The kit's optional parts and the polite refusal when one is not installed (httpx's pattern).

A suite-only install stays small: Dask (hunts over many processes or machines) and psycopg (the
reference's PostgreSQL store) come with the extras named here. A command that needs one that is
missing says which, and the one pip command that adds it, instead of a traceback.
"""

from __future__ import annotations

import importlib
from typing import Final

from refkit.errors import RefkitError

__all__ = ["EXTRAS", "MissingExtra", "require"]

# extra -> the modules it brings that the kit imports (pyproject.toml's [project.optional-dependencies])
EXTRAS: Final = {
    "hunt": ("distributed",),
    "postgres": ("psycopg", "psycopg_pool"),
    "faults": ("matplotlib",),  # only the fault campaigns' plots: without it they are skipped, with one line
}


class MissingExtra(RefkitError, ImportError):
    """An optional part of the kit is not installed; ``str()`` is the one line to print."""


def require(extra: str, feature: str) -> None:
    """Import the modules of ``extra``; ``feature`` names what needs them (a flag, a backend).

    Raises:
        MissingExtra: one of them cannot be imported; the message ends with the pip command.
    """
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtra(f"{feature} needs {module}, which is not installed; add it with: "
                               f"python3 -m pip install 'aidememo-conformance[{extra}]'") from exc
