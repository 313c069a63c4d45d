"""One SQLite file shared by many threads: a connection each, the same settings, faults told apart.

Both references store through this (the AideMemo ledger's ``_sqlite`` and XMemo's
``xmemo._sqlite``), so they agree on what makes a write durable and when a fault is worth a
retry. Every connection runs in autocommit mode (transactions are explicit ``BEGIN``s), WAL with
``synchronous=NORMAL`` (a committed write survives ``kill -9`` of the process, not power loss),
and waits ``busy_timeout_ms`` for another writer's lock before giving up.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ["BUSY_TIMEOUT_MS", "Connections", "is_busy", "transaction"]

BUSY_TIMEOUT_MS: Final = 5_000  # upstream sqlite/lib.rs busy timeout


def is_busy(exc: BaseException) -> bool:
    """Whether a fault is a lock wait that ran out (retryable: 503) rather than a broken file (500)."""
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class Connections:
    """The connections to one file: each thread opens its own on first use; ``close`` closes all.

    A connection lives as long as its thread: the next thread to open one closes those of the
    threads that ended since, so a server (or a simulator) that runs work on short-lived threads
    holds one connection per live thread, not one per thread it ever ran. Closing another
    thread's connection is safe here: no statement of an ended thread can still be running.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: dict[threading.Thread, sqlite3.Connection] = {}

    def get(self) -> sqlite3.Connection:
        """This thread's connection."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self.busy_timeout_ms / 1000)
            conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                ended = [thread for thread in self._open if not thread.is_alive()]
                for thread in ended:
                    self._open.pop(thread).close()
                self._open[threading.current_thread()] = conn
        return conn

    def __len__(self) -> int:
        """How many connections are open (the tests count them)."""
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        with self._lock:
            for conn in self._open.values():
                conn.close()
            self._open.clear()
        self._local = threading.local()


@contextmanager
def transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """``BEGIN <mode>`` ... ``COMMIT``, rolled back when the block raises; sqlite3 errors pass through.

    ``IMMEDIATE`` takes the file's write lock before the first read, so the reads a write decides
    on cannot be stale by the time it commits.
    """
    conn.execute(f"BEGIN {mode}")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
