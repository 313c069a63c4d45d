"""A planted variant of the XMemo reference that only a restart reveals, as a ``[serve]`` command.

``python tests/xmemo/fault_mutants.py NAME serve ARGS...`` runs ``aidememo-ref xmemo serve
ARGS...`` with NAME's change; ``tests/xmemo/test_fault_races.py`` shows a short fault campaign
(``aidememo-sim xmemo run --faults kill``) finds it, and that the same command finds it again.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from any directory

from xmemo_ref import _sqlite, _verbs  # noqa: E402
from xmemo_ref._store import IdempotencyClaim, Plan  # noqa: E402

_LOCK = threading.Lock()
_ANSWERS: dict[tuple[object, str], str] = {}  # what one process remembers; a restart forgets it


def memory_keys(store: Any, tenant: Any, *, idempotency: IdempotencyClaim | None, plan: Plan) -> tuple[str, bool]:
    """Idempotency keys kept in memory only: the store writes every capture without its key, so
    within one process a resent capture is answered again, and after a restart it makes a second
    memory."""
    if idempotency is None:
        return ORIGINAL(store, tenant, idempotency=None, plan=plan)
    with _LOCK:
        known = _ANSWERS.get((tenant, idempotency.key))
        if known is not None:
            return known, True
        answer, replayed = ORIGINAL(store, tenant, idempotency=None, plan=plan)
        _ANSWERS[(tenant, idempotency.key)] = answer
        return answer, replayed


ORIGINAL = _sqlite.SQLiteXMemoStore.write
MUTANTS = {f.__name__: f for f in (memory_keys,)}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in MUTANTS:
        print(f"usage: fault_mutants.py {{{','.join(MUTANTS)}}} serve ARGS...", file=sys.stderr)
        return 2
    _sqlite.SQLiteXMemoStore.write = MUTANTS[argv[0]]  # type: ignore[method-assign, assignment]
    return _verbs.run(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
