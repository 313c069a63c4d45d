"""The aidememo-local profile's settings: the shared ``cli`` command line and nothing of its own."""

from __future__ import annotations

from typing import Any

from conformance.profile import CLI, TargetDescription
from conformance.settings import Setting, Settings

__all__ = ["SETTINGS", "describe"]

SETTINGS: tuple[Setting[Any], ...] = (CLI,)


def describe(settings: Settings, config: Any) -> TargetDescription:
    command = settings[CLI]
    return TargetDescription(target=" ".join(command) if command else "embedded aidememo-ref CLI", mode="command line")
