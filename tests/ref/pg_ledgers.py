"""Ledger factories for ``aidememo-sim run --ledger`` that put the embedded reference on PostgreSQL.

Each call opens a fresh database on the server in ``$AIDEMEMO_POSTGRES_URL`` (the simulator
passes a SQLite path; it is not used). ``double_accept`` is the planted race of
``tests/sim/mutants.py`` (built from the store's primitives only) on PostgreSQL.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

from aidememo_ref import ReferenceLedger

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
import mutants  # noqa: E402

__all__ = ["reference", "double_accept"]


def _fresh_database() -> str:
    import psycopg

    server = os.environ["AIDEMEMO_POSTGRES_URL"]
    name = f"sim_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[call-overload]
    return f"{server.rsplit('/', 1)[0]}/{name}"


def reference(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
    return ReferenceLedger(postgres_url=_fresh_database(), clock=clock, scheduler=scheduler)


def double_accept(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
    return ReferenceLedger(postgres_url=_fresh_database(), clock=clock, scheduler=scheduler,
                           execute=mutants.RECIPES["double_accept"])
