"""How a command ends: a failure's files and the commands that reproduce it, a hunt's summary,
and the exit code each gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulations.commands import EXIT_OK, EXIT_UNKNOWN, EXIT_VIOLATION
from simulations.linearizability.checker import Verdict

__all__ = ["exported", "hunt_ending"]


def exported(paths: dict[str, Path], replay_words: Sequence[str] = (),
              reproduction: tuple[int, int] | None = None) -> int:
    from simulations.replay import finding_lines, reproduce_lines

    for line in finding_lines(paths):
        print(line)
    for label, path in paths.items():
        print(f"{label}: {path}")
    for line in reproduce_lines(paths, reproduction, replay_words):
        print(line)
    return EXIT_VIOLATION


def hunt_ending(hunt: Any, command: str, shard_command: str) -> int:
    from simulations.hunt import summary

    for line in summary(hunt, shard_command):
        print(line)
    if hunt.interrupted:
        print(f"interrupted; run the hunt again with: {command}")
        return 130
    if hunt.findings:
        return EXIT_VIOLATION
    return EXIT_UNKNOWN if hunt.lost or any(o.verdict is Verdict.UNKNOWN for o in hunt.done) else EXIT_OK
