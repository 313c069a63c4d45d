"""The XMemo store's memory: every tenant's current memories, the capture rules' lookups, the replays.

Theory of operation. The file is a log (``_sqlite``): each row is one capture's answer, which
shows the memory as that capture left it, plus its idempotency key. This module folds rows into
what the rules and reads look things up by, per tenant:

* the memories by id, in the order they were first written (table layout 1's ``seq``: "the
  first" of several matches is the first written);
* for ``remember``: its ``semantic_key`` within a scope, and the six fields ``dedupe`` compares;
* for ``update_state``: its slot (bucket, scope, ``state_key``);
* the idempotency answers by key, each with the fingerprint of the request that stored it.

Memory ids are unique across the whole file, as layout 1's unique index made them. A row is
applied once, in log order (``apply`` refuses a gap); folding a row again is a no-op, so a
connection that reads a row another thread of this process already applied changes nothing.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias, TypeVar

from refkit.records import distinct

from ._records import Kind, Memory, MemoryType, Tenant

if TYPE_CHECKING:
    from ._index import RecallIndex
    from ._writes import Remember

__all__ = ["StoreState", "TenantMemories", "Lookups", "Replay", "TenantKey", "tenant_key"]

TenantKey: TypeAlias = tuple[str, str, str, str]
_DuplicateKey: TypeAlias = tuple[str, str, str, str | None, str | None, MemoryType]
_K = TypeVar("_K")
# Looked up once: an enum class's attributes go through EnumType.__getattr__'s hook (``_writes``).
_MEMORY: Final = Kind.MEMORY
_STATE: Final = Kind.STATE


def tenant_key(tenant: Tenant) -> TenantKey:
    return tenant.owner_id, tenant.organization_id, tenant.workspace_id, tenant.project_id


def _file(table: dict[_K, set[str]], key: _K, memory_id: str, add: bool) -> None:
    """Add ``memory_id`` under ``key``, or take it away (and the key with its last id)."""
    if add:
        ids = table.get(key)
        if ids is None:
            table[key] = {memory_id}
        else:
            ids.add(memory_id)
        return
    ids = table[key]
    ids.discard(memory_id)
    if not ids:
        del table[key]


@distinct
class Replay(NamedTuple):
    fingerprint: str  # of the request that stored the answer
    answer: str  # the answer, byte for byte


class TenantMemories:
    """One tenant's memories and the lookups built from them."""

    __slots__ = ("tenant", "memories", "_ordinal", "_semantic", "_duplicates", "_slots", "_paths", "replays",
                 "recall", "lookups")

    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self.memories: dict[str, Memory] = {}  # id -> current version, in first-written order
        self._ordinal: dict[str, int] = {}
        self._semantic: dict[tuple[str | None, str], set[str]] = {}
        self._duplicates: dict[_DuplicateKey, set[str]] = {}
        self._slots: dict[tuple[str, str, str], set[str]] = {}
        self._paths: dict[str, set[str]] = {}  # a read filtered on one exact path reads only those
        self.replays: dict[str, Replay] = {}
        self.recall: RecallIndex | None = None  # built by the first recall that needs it
        self.lookups = Lookups(self)  # the capture rules' view of them, made once

    def put(self, memory: Memory) -> None:
        mid = memory[0]  # memory.id (see _lookups)
        old = self.memories.get(mid)
        if old is not None:
            self._lookups(old, add=False)
        else:
            self._ordinal[mid] = len(self._ordinal)
        self.memories[mid] = memory
        self._lookups(memory, add=True)
        if self.recall is not None:
            self.recall.changed(mid)

    def _lookups(self, memory: Memory, *, add: bool) -> None:
        # The fields by position, as one unpacking: each NamedTuple field read by name is a generic
        # attribute lookup on Python 3.11 (about 150 instructions), and every capture comes here.
        mid, _, kind, _, path, bucket, scope, _, _, _, _, _, semantic_key, state_key = memory[:14]
        _file(self._paths, path, mid, add)
        if kind is _MEMORY:
            # (content, path, bucket, scope, team_id, memory_type): Memory's fields 3 to 8, in order
            _file(self._duplicates, memory[3:9], mid, add)
            if semantic_key is not None:
                _file(self._semantic, (scope, semantic_key), mid, add)
        elif kind is _STATE and state_key is not None:
            _file(self._slots, (bucket, scope or "", state_key), mid, add)

    def at_path(self, path: str) -> list[Memory]:
        """The memories whose path is exactly ``path``, in first-written order (as ``memories``)."""
        return [self.memories[mid] for mid in sorted(self._paths.get(path, ()), key=self._ordinal.__getitem__)]

    def first(self, ids: set[str] | None) -> Memory | None:
        """The first written of ``ids``."""
        if not ids:
            return None
        return self.memories[min(ids, key=self._ordinal.__getitem__)]

    def semantic(self, scope: str | None, semantic_key: str) -> Memory | None:
        return self.first(self._semantic.get((scope, semantic_key)))

    def duplicate(self, key: _DuplicateKey) -> Memory | None:
        return self.first(self._duplicates.get(key))

    def slot(self, bucket: str, scope: str | None, state_key: str) -> Memory | None:
        return self.first(self._slots.get((bucket, scope or "", state_key)))


class Lookups:
    """The capture rules' ``Existing``: one tenant's memories, as the open write transaction sees them."""

    __slots__ = ("_tenant",)

    def __init__(self, tenant: TenantMemories) -> None:
        self._tenant = tenant

    def by_semantic_key(self, scope: str | None, semantic_key: str) -> Memory | None:
        return self._tenant.semantic(scope, semantic_key)

    def duplicate(self, write: Remember) -> Memory | None:
        # (content, path, bucket, scope, team_id, memory_type): Remember's first six fields, in order
        return self._tenant.duplicate(write[:6])

    def slot(self, bucket: str, scope: str | None, state_key: str) -> Memory | None:
        return self._tenant.slot(bucket, scope, state_key)

    def by_id(self, memory_id: str) -> Memory | None:
        return self._tenant.memories.get(memory_id)


class StoreState:
    """Every tenant's memories, shared by a store's threads under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # reentrant: a recall's packing runs under it and may read again
        self.applied = 0  # the last log row folded in
        self._tenants: dict[TenantKey, TenantMemories] = {}
        self._owner_of: dict[str, TenantKey] = {}  # memory id -> its tenant: ids are unique in the file

    def tenant(self, tenant: Tenant) -> TenantMemories:
        key = (tenant.owner_id, tenant.organization_id, tenant.workspace_id, tenant.project_id)  # tenant_key
        found = self._tenants.get(key)
        if found is None:
            found = self._tenants[key] = TenantMemories(tenant)
        return found

    def known(self, owner_id: str, organization_id: str, workspace_id: str, project_id: str) -> Tenant:
        """The tenant of these ids: the one memory already holds (one object per tenant), or a new one."""
        found = self._tenants.get((owner_id, organization_id, workspace_id, project_id))
        if found is not None:
            return found.tenant
        return Tenant(owner_id=owner_id, organization_id=organization_id, workspace_id=workspace_id,
                      project_id=project_id)

    def tenants(self) -> list[TenantMemories]:
        return list(self._tenants.values())

    def taken(self, memory_id: str) -> bool:
        """Whether a memory, of any tenant, already has this id."""
        return memory_id in self._owner_of

    def apply(self, n: int, tenant: Tenant, memory: Memory | None, replay: tuple[str, Replay] | None) -> None:
        """Fold log row ``n``: the memory it leaves (None: the row changed none) and its stored answer.

        Raises ValueError for a row out of order or a memory id another tenant holds."""
        if n <= self.applied:
            return
        if n != self.applied + 1:
            raise ValueError(f"log row {n} follows row {self.applied}: the log has a gap")
        key = (tenant.owner_id, tenant.organization_id, tenant.workspace_id, tenant.project_id)  # tenant_key
        if memory is not None and self._owner_of.setdefault(memory.id, key) != key:
            raise ValueError(f"log row {n}: memory {memory.id} belongs to another tenant")
        memories = self._tenants.get(key) or self.tenant(tenant)
        if memory is not None:
            memories.put(memory)
        if replay is not None:
            memories.replays[replay[0]] = replay[1]
        self.applied = n
