"""Hypothesis profiles for the simulator's tests: dev (default), ci, deep.

Pick one with ``AIDEMEMO_SIM_PROFILE=ci`` (or ``--hypothesis-profile`` when this file is
loaded before the option is read). Profiles change how much is explored, never what is checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from aidememo_ref import ReferenceLedger

from .served import served

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=15, stateful_step_count=20, **_COMMON)
settings.register_profile("ci", max_examples=40, stateful_step_count=30, **_COMMON)
settings.register_profile("deep", max_examples=400, stateful_step_count=60, **_COMMON)

PROFILE = os.environ.get("AIDEMEMO_SIM_PROFILE", "dev")
if PROFILE not in ("dev", "ci", "deep"):
    raise ValueError(f"AIDEMEMO_SIM_PROFILE must be dev, ci or deep, not {PROFILE!r}")
settings.load_profile(PROFILE)


@pytest.fixture(name="served", scope="module")
def served_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """``(url, tokens)`` of a reference served on loopback for the simulator's actors."""
    with served(ReferenceLedger(tmp_path_factory.mktemp("served") / "ledger.sqlite")) as answer:
        yield answer
