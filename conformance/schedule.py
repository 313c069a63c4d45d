"""Checks that share one slow step run last, in one process, whatever the xdist worker count.

A profile may name a *late* marker for a run (AideMemo: ``lease_expiry`` when lease expiry is
waited for in real time). Its checks share one slow step that starts at the first check a
process runs (AideMemo sets up every lease then) and is over by the time they run, so:

* every process orders them after its other checks (``order_late``), serially or not;
* under ``-n`` with xdist's default ``load`` distribution, ``LateScheduling`` hands out the
  other checks as ``load`` does and every late check to the first worker, ``gw0``, after it ran
  its share of the rest, so the wait overlaps the whole run on every worker count.

The controller collects nothing under xdist, so each worker writes the node ids of its late
checks, and of every check it collected, to a file in a directory the controller made
(``late_file``) before it reports its collection; the scheduler reads the late ones when it
schedules, and the reports the collection when a run is interrupted before any check reported. A worker that dies hands its pending
checks back; late checks sent elsewhere then set up and wait on their own (slower, still right).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["LATE_MARKER", "LATE_WORKER", "LateScheduling", "late_collection", "late_file", "order_late"]

LATE_WORKER = "gw0"
# Set by a profile's ``configure`` (in every process) to the marker of this run's late checks.
LATE_MARKER = pytest.StashKey[str]()


def order_late(items: list[pytest.Item], marker: str) -> None:
    """Move the checks with ``marker`` after the others, keeping both orders (in place)."""
    items[:] = [i for i in items if i.get_closest_marker(marker) is None] + [
        i for i in items if i.get_closest_marker(marker) is not None]


def late_file(directory: str, worker: str) -> Path:
    return Path(directory) / f"late-{worker}.json"


class LateScheduling:
    """xdist's ``load`` distribution with the late checks pinned to ``gw0``, after its other work.

    Implements pytest-xdist's ``Scheduling`` protocol: items are indices into the one collection
    every worker reported; a node holds at least two pending items until it is told to shut down
    (a worker keeps its last item back until more comes or it may stop).
    """

    def __init__(self, config: pytest.Config, log: Any, late_dir: str) -> None:
        from xdist.workermanage import parse_tx_spec_config  # type: ignore[import-untyped]

        self.numnodes = len(parse_tx_spec_config(config))
        self.log = log
        self.late_dir = late_dir
        self.node2collection: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.pending: list[int] = []
        self.late: list[int] = []  # late checks not sent yet
        self.collection: list[str] | None = None

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.pending or self.late:
            return False
        return all(len(pending) < 2 for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.pending or self.late or any(self.node2pending.values()))

    def add_node(self, node: Any) -> None:
        self.node2pending[node] = []

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        if self.collection is not None and list(collection) != self.collection:
            self.log(f"worker {node.gateway.id} collected other checks than the first worker; it gets none")
            return
        self.node2collection[node] = list(collection)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self.check_schedule(node)

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self.pending.insert(0, self.collection.index(item))
        for node in self.nodes:
            self.check_schedule(node)

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError  # only work stealing asks for this

    def remove_node(self, node: Any) -> str | None:
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        crashed = self.collection[pending.pop(0)]
        self.pending.extend(pending)  # late ones among them now run where they land, waiting on their own
        for other in self.nodes:
            self.check_schedule(other)
        return crashed

    def schedule(self) -> None:
        if self.collection is not None:  # a node came up late: give it work
            for node in self.nodes:
                self.check_schedule(node)
            return
        self.collection = next(iter(self.node2collection.values()))
        late = self._late_ids()
        self.late = [i for i, nodeid in enumerate(self.collection) if nodeid in late]
        self.pending = [i for i, nodeid in enumerate(self.collection) if nodeid not in late]
        nodes = self.nodes
        # A first chunk for every node, the rest as they ask (as xdist's load does).
        chunk = max(1, len(self.pending) // (4 * len(nodes))) if nodes else 0
        for node in nodes:
            self._send(node, self.pending[:chunk])
        for node in nodes:
            self.check_schedule(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down or node not in self.node2pending:
            return
        mine = self.node2pending[node]
        if self.pending:
            if len(mine) < 2:
                share = max(2, len(self.pending) // (2 * len(self.node2pending)))
                self._send(node, self.pending[:share])
            return
        if self.late and self._late_node() is node:
            self._send(node, list(self.late))
        node.shutdown()

    def _late_node(self) -> Any:
        nodes = sorted(self.nodes, key=lambda n: n.gateway.id)
        return next((n for n in nodes if n.gateway.id == LATE_WORKER), nodes[0] if nodes else None)

    def _send(self, node: Any, indices: list[int]) -> None:
        if not indices:
            return
        sent = set(indices)
        self.pending = [i for i in self.pending if i not in sent]
        self.late = [i for i in self.late if i not in sent]
        self.node2pending[node].extend(indices)
        node.send_runtest_some(indices)

    def _late_ids(self) -> set[str]:
        found: set[str] = set()
        for data in _reports(self.late_dir):
            found |= {str(nodeid) for nodeid in data.get("late", [])}
        return found


def _reports(directory: str) -> list[dict[str, list[Any]]]:
    found = []
    for path in Path(directory).glob("late-*.json"):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue  # a worker that could not say: its late checks run as any other
        if isinstance(data, dict):
            found.append(data)
    return found


def late_collection(directory: str) -> list[tuple[str, str]]:
    """(node id, requirement id) of every check the workers collected, as they wrote it."""
    return [(str(pair[0]), str(pair[1])) for data in _reports(directory) for pair in data.get("collected", [])
            if isinstance(pair, list) and len(pair) == 2]
