"""The reference ledger as one object: storage, clock, service, and the ways to reach it."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, Unpack

from refkit.clock import AdvancingClock, Clock, SystemClock
from ._gateway import Bindings
from aidememo_wire.ids import bearer_digest, encode_ulid, id_problem, token_problem
from ._ledger import Decide
from refkit.served import Served
from refkit.response import Response
from ._service import Service
from ._sqlite import BUSY_TIMEOUT_MS, SQLiteStore
from ._store import Execute, ProvisionError, Scheduler, Store
from aidememo_wire.shapes import ROLES

if TYPE_CHECKING:
    from ._postgres import PostgresSettings

__all__ = ["ReferenceLedger", "Provisioning", "provision", "ProvisionError", "token_problem"]

HeaderPairs = Mapping[str, str] | Mapping[bytes, bytes] | Iterable[tuple[str | bytes, str | bytes]]

ACTOR_KINDS = ("human", "agent", "service")
MAX_DISPLAY_NAME_BYTES = 256


class Provisioning(TypedDict):
    """What ``aidememo-ref bootstrap`` takes: an actor, its token and its role in a project."""

    tenant_id: str
    project_id: str
    actor_id: str
    token: str
    role: NotRequired[str]  # owner | admin | writer (default) | reader
    actor_kind: NotRequired[str]  # human | agent (default) | service
    project_epoch: NotRequired[str | None]  # a fresh ULID when the project is new
    tenant_name: NotRequired[str | None]  # names default to their ids
    project_name: NotRequired[str | None]
    actor_name: NotRequired[str | None]


def _name_problem(label: str, value: str) -> str | None:
    if not value or len(value.encode("utf-8")) > MAX_DISPLAY_NAME_BYTES:
        return f"{label} must contain 1 to 256 bytes"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return f"{label} must not contain control characters"
    return None


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
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        execute: Execute | None = None,
        bindings: Bindings | None = None,
    ) -> None:
        if (database is None) == (postgres_url is None):
            raise ValueError("ReferenceLedger needs a SQLite database path or a PostgreSQL URL (exactly one)")
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
    tenant_id, project_id, actor_id, token = fields["tenant_id"], fields["project_id"], fields["actor_id"], fields["token"]
    role, actor_kind = fields.get("role", "writer"), fields.get("actor_kind", "agent")
    project_epoch = fields.get("project_epoch")
    for label, value in (("tenant_id", tenant_id), ("project_id", project_id), ("actor_id", actor_id)):
        problem = id_problem(value)
        if problem is not None:
            raise ProvisionError(f"invalid {label}: {problem}")
    if project_epoch is not None and (problem := id_problem(project_epoch)) is not None:
        raise ProvisionError(f"invalid project_epoch: {problem}")
    if role not in ROLES:
        raise ProvisionError("role must be owner, admin, writer, or reader")
    if actor_kind not in ACTOR_KINDS:
        raise ProvisionError("actor kind must be human, agent, or service")
    names = {"tenant name": fields.get("tenant_name") or tenant_id,
             "project name": fields.get("project_name") or project_id,
             "actor name": fields.get("actor_name") or actor_id}
    for label, value in names.items():
        if (problem := _name_problem(label, value)) is not None:
            raise ProvisionError(problem)
    if (problem := token_problem(token)) is not None:
        raise ProvisionError(problem)
    return store.provision(
        tenant_id=tenant_id, project_id=project_id, actor_id=actor_id, token_digest=bearer_digest(token),
        role=role, actor_kind=actor_kind, project_epoch=project_epoch,
        new_epoch=encode_ulid(now_ms, os.urandom(10)), tenant_name=names["tenant name"],
        project_name=names["project name"], actor_name=names["actor name"], now_ms=now_ms,
    )


def _open_store(database: str | Path | None, postgres_url: str | None, postgres: PostgresSettings | None,
                busy_timeout_ms: int) -> Store:
    if postgres_url is not None:
        from ._postgres import PostgresStore  # psycopg is loaded only for PostgreSQL

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
    store = _open_store(database, postgres_url, postgres, BUSY_TIMEOUT_MS)
    try:
        return _provision_store(store, SystemClock().now_ms(), fields)
    finally:
        store.close()
