"""Bootstrap's rules and its SQLite statements, light enough to start like a local command.

``aidememo-ref bootstrap`` runs once per identity (the conformance suite runs it for every actor
it provisions), so its start-up is most of its cost. This module holds what bootstrap needs and
imports nothing of the ledger's rules, its memory or the service: the validation of the
arguments (the same order and words as ``aidememo-server bootstrap``), the five identity
statements, and ``provision_current`` that runs them on a file already at this reference's
table layout, without building the ledger's memory from the change log. A new file, a layout to
upgrade or a file SQLite refuses goes the whole way (``_reference.provision``), which creates,
upgrades or names the fault exactly as the server does on open.
"""

from __future__ import annotations

import os
import sqlite3
import unicodedata
from pathlib import Path
from typing import Final, NamedTuple, NotRequired, TypedDict

from refkit.records import distinct

from ._errors import AideMemoRefError

from aidememo_wire.ids import bearer_digest, encode_ulid, id_problem, token_problem
from refkit.sqlitefile import BUSY_TIMEOUT_MS, Connections, transaction

__all__ = ["ACTOR_KINDS", "BUSY_TIMEOUT_MS", "LAYOUT_VERSION", "Checked", "ProvisionError", "Provisioning", "StoreError", "check",
           "insert_identity", "provision_current", "token_problem"]

LAYOUT_VERSION: Final = 5  # the SQLite file's table layout (PRAGMA user_version)
ACTOR_KINDS: Final = ("human", "agent", "service")
# The values of ``aidememo_wire.status.Role``, written out: its enums are 2.5M instructions of each bootstrap
# process's start-up (tests/ref/test_provision_light.py holds them equal).
ROLES: Final = ("owner", "admin", "writer", "reader")
MAX_DISPLAY_NAME_BYTES: Final = 256


class ProvisionError(AideMemoRefError):
    """Bootstrap refused: the message is one line for the command line."""


class StoreError(AideMemoRefError):
    """A database the reference cannot use (foreign layout, unreachable server); one line."""


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


@distinct
class Checked(NamedTuple):
    """Bootstrap's arguments once accepted: what a store's ``provision`` writes."""

    tenant_id: str
    project_id: str
    actor_id: str
    token_digest: bytes
    role: str
    actor_kind: str
    project_epoch: str | None
    new_epoch: str
    tenant_name: str
    project_name: str
    actor_name: str
    now_ms: int


def _name_problem(label: str, value: str) -> str | None:
    if not value or len(value.encode("utf-8")) > MAX_DISPLAY_NAME_BYTES:
        return f"{label} must contain 1 to 256 bytes"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return f"{label} must not contain control characters"
    return None


def check(fields: Provisioning, now_ms: int) -> Checked:
    """Bootstrap's refusals, in upstream's order.

    Raises:
        ProvisionError: an argument bootstrap refuses.
    """
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
    return Checked(tenant_id, project_id, actor_id, bearer_digest(token), role, actor_kind, project_epoch,
                   encode_ulid(now_ms, os.urandom(10)), names["tenant name"], names["project name"],
                   names["actor name"], now_ms)


def insert_identity(conn: sqlite3.Connection, c: Checked) -> str:
    """Tenant, project, actor, membership and token binding, inside the caller's write
    transaction; returns the project epoch. Re-running the same identity is a no-op.

    Raises:
        ProvisionError: the identity conflicts with what the file holds.
    """
    conn.execute("INSERT OR IGNORE INTO tenants(tenant_id, display_name, created_at_ms) VALUES (?,?,?)",
                 (c.tenant_id, c.tenant_name, c.now_ms))
    row = conn.execute("SELECT project_epoch FROM projects WHERE tenant_id=? AND project_id=?",
                       (c.tenant_id, c.project_id)).fetchone()
    if row is None:
        epoch = c.project_epoch or c.new_epoch
        conn.execute("INSERT INTO projects(tenant_id, project_id, project_epoch, display_name, created_at_ms) "
                     "VALUES (?,?,?,?,?)", (c.tenant_id, c.project_id, epoch, c.project_name, c.now_ms))
    else:
        epoch = str(row[0])
        if c.project_epoch is not None and c.project_epoch != epoch:
            raise ProvisionError(
                f"project epoch conflict: project {c.project_id} already has epoch {epoch}, not {c.project_epoch}")
    row = conn.execute("SELECT kind FROM actors WHERE tenant_id=? AND actor_id=?", (c.tenant_id, c.actor_id)).fetchone()
    if row is None:
        conn.execute("INSERT INTO actors(tenant_id, actor_id, display_name, kind, created_at_ms) VALUES (?,?,?,?,?)",
                     (c.tenant_id, c.actor_id, c.actor_name, c.actor_kind, c.now_ms))
    elif row[0] != c.actor_kind:
        raise ProvisionError(f"actor identity conflict: actor {c.actor_id} is a {row[0]}, not a {c.actor_kind}")
    row = conn.execute("SELECT role FROM memberships WHERE tenant_id=? AND project_id=? AND actor_id=?",
                       (c.tenant_id, c.project_id, c.actor_id)).fetchone()
    if row is None:
        conn.execute("INSERT INTO memberships(tenant_id, project_id, actor_id, role) VALUES (?,?,?,?)",
                     (c.tenant_id, c.project_id, c.actor_id, c.role))
    elif row[0] != c.role:
        raise ProvisionError(f"membership conflict: actor {c.actor_id} is a {row[0]} of {c.project_id}, not a {c.role}")
    row = conn.execute("SELECT tenant_id, actor_id FROM token_bindings WHERE token_sha256=?",
                       (c.token_digest,)).fetchone()
    if row is None:
        conn.execute("INSERT INTO token_bindings(token_sha256, tenant_id, actor_id, created_at_ms) VALUES (?,?,?,?)",
                     (c.token_digest, c.tenant_id, c.actor_id, c.now_ms))
    elif (row[0], row[1]) != (c.tenant_id, c.actor_id):
        raise ProvisionError("token binding conflicts: this token is already bound to another actor")
    return epoch


def provision_current(database: str | Path, fields: Provisioning, now_ms: int, busy_timeout_ms: int) -> str | None:
    """Bootstrap on a SQLite file already at ``LAYOUT_VERSION``; None when it is not (or SQLite
    faults), for the caller to go the whole way, which says why in the server's words.

    The identity tables are all bootstrap writes and the server reads them from the file on
    every request, so nothing else of the ledger needs to be loaded.

    Raises:
        ProvisionError: as ``check`` and ``insert_identity``.
    """
    if not Path(database).is_file():
        return None  # a new file: the store creates the whole schema
    connections = Connections(database, busy_timeout_ms=busy_timeout_ms)
    try:
        with transaction(connections.get()) as conn:
            if conn.execute("PRAGMA user_version").fetchone()[0] != LAYOUT_VERSION:
                return None
            return insert_identity(conn, check(fields, now_ms))
    except sqlite3.DatabaseError:
        return None
    finally:
        connections.close()
