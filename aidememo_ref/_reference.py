"""The reference ledger as one object: storage, clock, service, and the ways to reach it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from refkit.clock import AdvancingClock, Clock, SystemClock
from refkit.extras import require
from ._gateway import Bindings
from . import _ledger
from ._ledger import Decide
from ._state import LEASE_MS
from refkit.served import Served
from refkit.response import Response
from ._service import Service
from ._sqlite import BUSY_TIMEOUT_MS, SQLiteStore
from ._provision import ProvisionError, Provisioning, check, provision_current, token_problem
from ._store import Execute, Scheduler, Store

if TYPE_CHECKING:
    from ._postgres import PostgresSettings

__all__ = ["ReferenceLedger", "Provisioning", "provision", "ProvisionError", "token_problem"]

HeaderPairs = Mapping[str, str] | Mapping[bytes, bytes] | Iterable[tuple[str | bytes, str | bytes]]

class ReferenceLedger(Served):
    """The reference AideMemo server, without a socket.

    Args:
        database: SQLite file (created with its schema if missing); several ledgers, in threads
            or processes, may share it.
        postgres_url: a PostgreSQL database instead (its tables are created if missing); several
            ledgers and ``aidememo-ref serve`` processes may share it. Never logged.
        postgres: pool size and timeouts for PostgreSQL (upstream's defaults otherwise).
        clock: a ``Clock`` (anything with ``now_ms()``); defaults to the wall clock.
        scheduler: object with ``point(name)``, called at transaction boundaries.
        test_clock: serve the ``/__test__/clock`` extension (needs an ``AdvancingClock``).
        decide: replacement for the rule function (used by the kit's own mutants).
        lease_ms: how long a claim lease lasts (upstream's 120000 by default; ``serve
            --claim-lease-ms`` shortens it so real-time lease checks wait seconds). A
            replacement ``decide`` brings its own rules, so it cannot be given with another lease.
        busy_timeout_ms: how long a write waits for another writer's lock before answering 503.
        execute: replacement for the transaction recipe ``_store.execute``: the kit's planted
            race bugs compose the store's primitives wrongly through it.
        bindings: tokens confined to the MCP gateway, one source and one actor (``--auth-bindings-file``).
    """

    def __init__(
        self,
        database: str | Path | None = None,
        *,
        postgres_url: str | None = None,
        postgres: PostgresSettings | None = None,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        test_clock: bool = False,
        decide: Decide | None = None,
        lease_ms: int = LEASE_MS,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        execute: Execute | None = None,
        bindings: Bindings | None = None,
    ) -> None:
        if (database is None) == (postgres_url is None):
            raise ValueError("ReferenceLedger needs a SQLite database path or a PostgreSQL URL (exactly one)")
        if decide is None:  # upstream's lease is decide's default: no partial (and its keyword dict) per command
            decide = _ledger.decide if lease_ms == LEASE_MS else partial(_ledger.decide, lease_ms=lease_ms)
        elif lease_ms != LEASE_MS:
            raise ValueError("a replacement decide brings its own rules: give it the lease, not ReferenceLedger")
        self.lease_ms = lease_ms
        self.database = None if database is None else str(database)
        self.clock: Clock = clock if clock is not None else SystemClock()
        if test_clock and not isinstance(self.clock, AdvancingClock):
            raise TypeError("test_clock needs a clock with advance(ms), e.g. OffsetClock or ManualClock")
        self.store: Store = _open_store(database, postgres_url, postgres, busy_timeout_ms)
        self.service: Service = Service(self.store, self.clock, test_clock=test_clock, decide=decide, execute=execute,
                               scheduler=scheduler, bindings=bindings)

    def handle(self, method: str, target: str | bytes, headers: HeaderPairs = (), body: bytes = b"") -> Response:
        """Answer one HTTP request given as method, raw target, header pairs and body bytes."""
        if type(headers) is list or type(headers) is tuple:  # skips the Mapping ABC check for pairs
            for k, v in headers:
                if type(k) is not bytes or type(v) is not bytes:
                    break
            else:  # byte pairs already: passed on as they are
                return self.service.handle(method, target, headers, body)
        else:
            headers = headers.items() if isinstance(headers, Mapping) else headers
        pairs = [(k if type(k) is bytes else _latin1(k), v if type(v) is bytes else _latin1(v))
                 for k, v in headers]
        return self.service.handle(method, target, pairs, body)

    def provision(self, **fields: Unpack[Provisioning]) -> str:
        """Bootstrap an actor into a project (see ``provision``); returns the project epoch."""
        return _provision_store(self.store, self.clock.now_ms(), fields)

    def bind_token(self, token: str, source_id: str, actor_id: str) -> None:
        """Confine a provisioned ``token`` to the MCP gateway, one source and one actor (what an
        ``--auth-bindings-file`` entry does, at run time). Raises ``BindingsError`` on a bad id."""
        self.service.bind_token(token, source_id, actor_id)


def _latin1(value: str | bytes) -> bytes:
    return value.encode("latin-1") if isinstance(value, str) else value


def _provision_store(store: Store, now_ms: int, fields: Provisioning) -> str:
    return store.provision(**check(fields, now_ms)._asdict())


def _open_store(database: str | Path | None, postgres_url: str | None, postgres: PostgresSettings | None,
                busy_timeout_ms: int) -> Store:
    if postgres_url is not None:
        require("postgres", "the PostgreSQL store")  # psycopg is loaded only for PostgreSQL
        from ._postgres import PostgresStore

        return PostgresStore(postgres_url, postgres)
    assert database is not None
    return SQLiteStore(database, busy_timeout_ms=busy_timeout_ms)


def provision(database: str | Path | None = None, *, postgres_url: str | None = None,
              postgres: PostgresSettings | None = None, **fields: Unpack[Provisioning]) -> str:
    """Do what ``aidememo-ref bootstrap`` does, on a SQLite file or a PostgreSQL database (exactly
    one); returns the project epoch.

    The fields are those of ``Provisioning``. Raises ``ProvisionError`` on invalid or
    conflicting input.
    """
    if (database is None) == (postgres_url is None):
        raise ValueError("provision needs a SQLite database path or a PostgreSQL URL (exactly one)")
    now_ms = SystemClock().now_ms()
    if database is not None:
        epoch = provision_current(database, fields, now_ms, BUSY_TIMEOUT_MS)
        if epoch is not None:
            return epoch
    store = _open_store(database, postgres_url, postgres, BUSY_TIMEOUT_MS)
    try:
        return _provision_store(store, now_ms, fields)
    finally:
        store.close()
