"""Hypothesis settings profiles for the kit's tests: ``dev`` (the default), ``ci`` and ``deep``.

Pick one with pytest's own ``--hypothesis-profile ci``. Profiles change how much is explored,
never what is checked; tests that set their own ``max_examples`` keep it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
settings.register_profile("dev", max_examples=15, stateful_step_count=20, **_COMMON)  # type: ignore[arg-type]
# CI: more, and derandomized, so a red build is the same red build when rerun; print_blob
# prints the @reproduce_failure line for the failing example.
settings.register_profile("ci", max_examples=40, stateful_step_count=30, derandomize=True, print_blob=True,
                          **_COMMON)  # type: ignore[arg-type]
settings.register_profile("deep", max_examples=400, stateful_step_count=60, **_COMMON)  # type: ignore[arg-type]
# The default; ``--hypothesis-profile`` (read after this file) replaces it.
settings.load_profile("dev")
