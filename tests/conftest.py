"""Fixtures every test folder may use: Hypothesis profiles, and a real PostgreSQL for the
storage-sensitive tests.

Hypothesis profiles: ``dev`` (the default), ``ci`` and ``deep``, picked with pytest's own
``--hypothesis-profile ci``. Profiles change how much is explored, never what is checked; tests
that set their own ``max_examples`` keep it.

PostgreSQL:
One throwaway cluster per test process (``scripts/postgres.sh``, fsync off: the tests kill our
servers, never PostgreSQL), one fresh database per test. Set ``AIDEMEMO_TEST_POSTGRES_URL`` to
use a server of your own instead. Without PostgreSQL these tests skip with one line saying how
to get it, except in CI (``CI`` set), where they fail: CI installs PostgreSQL, so a missing one
is a broken setup, not a reason to pass.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
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

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "postgres.sh"
HOWTO = ("PostgreSQL not available: install the server (sudo scripts/postgres.sh install) "
         "or set AIDEMEMO_TEST_POSTGRES_URL")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a running PostgreSQL (database ``postgres``), for this test process."""
    external = os.environ.get("AIDEMEMO_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    home = tmp_path_factory.mktemp("postgres")
    started = subprocess.run(["bash", str(SCRIPT), "start", str(home), "--fast"], capture_output=True, text=True,
                             timeout=120)
    if started.returncode != 0:
        detail = (started.stderr.strip().splitlines() or ["no output"])[-1]
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI and did not start: {detail}")
        pytest.skip(HOWTO)
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(home)], capture_output=True, timeout=60)


def _admin(server_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[call-overload]


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database on the test process's PostgreSQL."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    _admin(postgres_server, f"CREATE DATABASE {name}")
    yield f"{postgres_server.rsplit('/', 1)[0]}/{name}"
    _admin(postgres_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
