"""Binding API keys to an owner's tenant: what ``aidememo-ref xmemo bootstrap`` does.

Kept apart from the service so that bootstrapping imports only storage and the key rules.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from refkit.clock import SystemClock
from ._errors import ProvisionError
from ._keys import key_digest, key_problem
from ._records import KNOWN_SCOPES, Principal, Tenant
from ._sqlite import SQLiteXMemoStore

__all__ = ["provision_key", "provision_store", "default_tenant", "DEFAULT_SCOPES"]

DEFAULT_SCOPES: Final = KNOWN_SCOPES
_OWNER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,119}\Z")
_TENANT_PART: Final = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")  # MAF's project grammar, for all three parts
_AGENT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}\Z")


def default_tenant(owner_id: str, organization_id: str | None = None, workspace_id: str | None = None,
                   project_id: str | None = None) -> Tenant:
    """The owner's tenant; parts not given default to ``org-<owner>``, ``ws-<owner>``, ``<owner>``."""
    return Tenant(owner_id=owner_id, organization_id=organization_id or f"org-{owner_id}",
                  workspace_id=workspace_id or f"ws-{owner_id}", project_id=project_id or owner_id)


def _principal(*, owner_id: str, scopes: tuple[str, ...] | list[str], agent_id: str | None,
               organization_id: str | None, workspace_id: str | None, project_id: str | None) -> Principal:
    if not _OWNER.match(owner_id):
        raise ProvisionError("invalid owner id: use 1 to 120 ASCII letters, digits, '-' or '_', starting alphanumeric")
    for label, value in (("organization id", organization_id), ("workspace id", workspace_id),
                         ("project id", project_id)):
        if value is not None and not _TENANT_PART.match(value):
            raise ProvisionError(f"invalid {label}: use 1 to 128 ASCII letters, digits, '-' or '_'")
    if agent_id is not None and not _AGENT.match(agent_id):
        raise ProvisionError("invalid agent id: use 1 to 128 visible ASCII characters (letters, digits, ._:@/-)")
    chosen = tuple(dict.fromkeys(s.strip() for s in scopes if s.strip()))
    if not chosen:
        raise ProvisionError("scopes must name memory:read and/or memory:write")
    unknown = [s for s in chosen if s not in KNOWN_SCOPES]
    if unknown:
        raise ProvisionError(f"unknown scope {unknown[0]}: scopes are memory:read and memory:write")
    ordered = tuple(s for s in KNOWN_SCOPES if s in chosen)
    return Principal(tenant=default_tenant(owner_id, organization_id, workspace_id, project_id), scopes=ordered,
                     bound_agent_id=agent_id)


def provision_store(store: SQLiteXMemoStore, now_ms: int, *, owner_id: str, key: str,
                    scopes: tuple[str, ...] | list[str], agent_id: str | None, organization_id: str | None,
                    workspace_id: str | None, project_id: str | None) -> tuple[Principal, bool]:
    """Validate, then bind ``key`` in ``store`` (the reference object's ``provision`` uses it too)."""
    principal = _principal(owner_id=owner_id, scopes=scopes, agent_id=agent_id, organization_id=organization_id,
                           workspace_id=workspace_id, project_id=project_id)
    if (problem := key_problem(key)) is not None:
        raise ProvisionError(problem)
    created = store.provision(key_digest=key_digest(key), principal=principal, now_ms=now_ms)
    return principal, created


def provision_key(database: str | Path, *, owner_id: str, key: str,
                  scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES, agent_id: str | None = None,
                  organization_id: str | None = None, workspace_id: str | None = None,
                  project_id: str | None = None) -> tuple[Principal, bool]:
    """Do what ``aidememo-ref xmemo bootstrap`` does; returns (principal, newly bound).

    Re-running with the same arguments changes nothing; the same key with any other owner,
    tenant, scope set or agent is refused with ``ProvisionError``, as is a key shorter than 24
    characters.
    """
    store = SQLiteXMemoStore(database)
    try:
        return provision_store(store, SystemClock().now_ms(), owner_id=owner_id, key=key, scopes=scopes,
                          agent_id=agent_id, organization_id=organization_id, workspace_id=workspace_id,
                          project_id=project_id)
    finally:
        store.close()
