"""The store seam: the one narrow protocol between XMemo's rules and a database.

Every read takes the caller's ``Tenant`` and returns only that tenant's rows, so no rule above
this line can leak across owners even by mistake. A write is one transaction: the store looks up
the idempotency key, hands the rules an ``Existing`` view of the same transaction, applies the
decision the rules return, records the answer under the key, and commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from ._records import Memory, MemoryType, Principal, Tenant
from ._writes import Existing, WriteDecision

if TYPE_CHECKING:
    from ._recall import Candidates

__all__ = ["ReadFilter", "IdempotencyClaim", "Plan", "XMemoStore"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadFilter:
    """Read filters within a tenant; None means "any" (the wire's ``%`` and ``auto``)."""

    scope: str | None = None
    bucket: str | None = None
    memory_type: MemoryType | None = None
    team_id: str | None = None
    path: str | None = None  # exact, or a prefix when it ends with % or *
    since_ms: int | None = None  # created_at in [since, until)
    until_ms: int | None = None

    def admits(self, memory: Memory, now_ms: int) -> bool:
        """Whether ``memory`` is unexpired at ``now_ms`` and passes every filter (layout 1's WHERE clause)."""
        if memory.expires_at_ms is not None and memory.expires_at_ms <= now_ms:
            return False
        if ((self.scope is not None and memory.scope != self.scope)
                or (self.bucket is not None and memory.bucket != self.bucket)
                or (self.team_id is not None and memory.team_id != self.team_id)
                or (self.memory_type is not None and memory.memory_type is not self.memory_type)):
            return False
        if self.path is not None:
            if self.path.endswith(("%", "*")):
                if not memory.path.startswith(self.path[:-1]):
                    return False
            elif memory.path != self.path:
                return False
        return (self.since_ms is None or memory.created_at_ms >= self.since_ms) and (
            self.until_ms is None or memory.created_at_ms < self.until_ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class IdempotencyClaim:
    key: str
    fingerprint: str  # of route and body, so a reused key with another request is refused


# The rules' side of a write: look at what exists, return the decision and the answer to store.
Plan = Callable[[Existing], tuple[WriteDecision, str]]


class XMemoStore(Protocol):
    def principal(self, key_digest: bytes, *, deferred: bool = False) -> Principal | None:
        """The active key's principal, or None for an unknown or inactive key.

        ``deferred``: the answer may come from what this thread last read, to be confirmed by
        the store's next statement (or ``confirm``), which raises ``KeyChanged`` if it changed."""
        ...

    def confirm(self) -> None:
        """Confirm a deferred ``principal`` answer no statement has confirmed yet; ``KeyChanged``."""
        ...

    def provision(self, *, key_digest: bytes, principal: Principal, now_ms: int) -> bool:
        """Bind a key; True when new, False when already bound identically; ProvisionError on conflict."""
        ...

    def write(self, tenant: Tenant, *, idempotency: IdempotencyClaim | None, plan: Plan) -> tuple[str, bool]:
        """Run ``plan`` in one transaction; returns (answer, replayed)."""
        ...

    def visible(self, tenant: Tenant, filters: ReadFilter, now_ms: int) -> list[Memory]:
        """Every unexpired memory of ``tenant`` that passes ``filters``."""
        ...

    def ranked(self, tenant: Tenant, filters: ReadFilter, now_ms: int, query: str, prefer_working: bool,
               consume: Callable[[Candidates], _T]) -> _T:
        """``consume`` what ``_recall.rank(visible(...), query, prefer_working)`` returns (the same
        memories, scores and order; it may be computed lazily, as ``consume`` walks it)."""
        ...

    def get(self, tenant: Tenant, memory_id: str, now_ms: int) -> Memory | None: ...

    def open_session(self, session_id: str, key_digest: bytes, protocol_version: str, now_ms: int) -> None: ...

    def session_owner(self, session_id: str) -> bytes | None:
        """The key digest an MCP session was opened with, or None when there is no such session."""
        ...

    def end_session(self, session_id: str) -> None: ...

    def close(self) -> None: ...
