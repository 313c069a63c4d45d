"""The SQLite file plumbing holds a connection per live thread, not per thread it ever served."""

from __future__ import annotations

import threading
from pathlib import Path

from refkit.sqlitefile import Connections


def _use(connections: Connections) -> None:
    connections.get().execute("SELECT 1").fetchone()


def test_a_thread_that_ended_gives_its_connection_back(tmp_path: Path) -> None:
    connections = Connections(tmp_path / "file.sqlite")
    try:
        _use(connections)  # this thread's stays open: it is alive
        for _ in range(40):
            thread = threading.Thread(target=_use, args=(connections,))
            thread.start()
            thread.join()
        # The last thread's connection was opened after the 39 before it ended; one more opener
        # closes it too.
        assert len(connections) == 2
        _use(connections)
        assert len(connections) == 2
        last = threading.Thread(target=_use, args=(connections,))
        last.start()
        last.join()
        assert len(connections) == 2
    finally:
        connections.close()
    assert len(connections) == 0


def test_a_live_thread_keeps_its_connection(tmp_path: Path) -> None:
    connections = Connections(tmp_path / "file.sqlite")
    release, opened = threading.Event(), threading.Event()
    seen: list[object] = []

    def hold() -> None:
        seen.append(connections.get())
        opened.set()
        release.wait(10)
        seen.append(connections.get())  # the same connection after others opened theirs

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert opened.wait(10)
        for _ in range(5):
            thread = threading.Thread(target=_use, args=(connections,))
            thread.start()
            thread.join()
        release.set()
        holder.join(10)
        assert seen[0] is seen[1]
        seen[1].execute("SELECT 1").fetchone()  # type: ignore[attr-defined]  # not closed under it
    finally:
        release.set()
        connections.close()
