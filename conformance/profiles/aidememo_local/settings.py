"""The aidememo-local profile's settings: the shared ``cli`` command line and nothing of its own; the
kit's CLI, the target without one."""

from __future__ import annotations

import sys
from typing import Any

from conformance.profile import CLI, TargetDescription
from conformance.settings import Setting, Settings

__all__ = ["EMBEDDED", "SETTINGS", "describe"]

SETTINGS: tuple[Setting[Any], ...] = (CLI,)


# This kit's CLI, run from the installed package: the target when no --cli is given.
EMBEDDED = (sys.executable, "-m", "aidememo_ref")


def describe(settings: Settings, config: Any) -> TargetDescription:
    command = settings[CLI]
    return TargetDescription(target=" ".join(command) if command else "embedded aidememo-ref CLI", mode="command line",
                             command=tuple(command) if command else EMBEDDED)
