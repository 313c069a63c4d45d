"""The simulator's tests: a reference served on loopback for them. Hypothesis profiles (dev, ci,
deep) live in ``tests/conftest.py`` and are chosen with ``--hypothesis-profile``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aidememo_ref import ReferenceLedger

from .served import served


@pytest.fixture(name="served", scope="module")
def served_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """``(url, tokens)`` of a reference served on loopback for the simulator's actors."""
    with served(ReferenceLedger(tmp_path_factory.mktemp("served") / "ledger.sqlite")) as answer:
        yield answer
