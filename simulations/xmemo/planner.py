"""Planning XMemo races: batches drawn from a seed, and the census that closes a campaign.

A batch sends, at once: the same capture with one idempotency key from several workers (a
client's outbox replay racing its original, or two agents replaying one shared operation), the
same ``semantic_key`` capture from several workers (MAF's dedupe), plain timeline appends, and
recalls with small random bounds. The census reads, per key, the key's private path.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from simulations.plan import Batch, PlannedOp

__all__ = ["XMemoPlanner"]

_WORDS = ("deploy", "adapter", "decision", "transport", "token", "fix", "handoff", "redis", "review", "status")
_KEY_WAYS = ("Idempotency-Key", "X-Idempotency-Key", "body", "all")


@dataclass(slots=True)
class XMemoPlanner:
    """Plans batches from a seed; ids carry ``run_id`` so runs against one server never collide."""

    rng: random.Random
    run_id: str
    workers: tuple[str, ...]
    count: int = 0
    keys: list[str] | None = None

    def _fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}-{self.run_id}-{self.count}"

    def _senders(self, k: int) -> list[int]:
        return self.rng.sample(range(len(self.workers)), k)

    def _capture(self, worker: int, *, route: str, key: str | None, body: dict[str, Any], via: str) -> PlannedOp:
        agent = self.workers[worker]
        path = "/v1/remember" if route == "remember" else "/v1/timeline/events"
        return PlannedOp(worker=worker, method="POST", path=path, body=body,
                         input={"op": "capture", "actor": agent, "route": route, "key": key, "via": via})

    def next_batch(self) -> Batch:
        if self.keys is None:
            self.keys = []
        scope = f"sim-{self.run_id}"
        ops: list[PlannedOp] = []
        for _ in range(self.rng.randint(2, 4)):
            roll = self.rng.random()
            if roll < 0.35:  # one idempotency key, several senders
                key = self._fresh("idem")
                self.keys.append(key)
                route = self.rng.choice(("remember", "timeline_event"))
                body: dict[str, Any] = {"content": f"capture {key}", "path": f"sim/{key}", "scope": scope}
                via = self.rng.choice(_KEY_WAYS)
                for worker in self._senders(self.rng.randint(2, 3)):
                    ops.append(self._capture(worker, route=route, key=key, body=dict(body), via=via))
            elif roll < 0.55:  # one semantic key and content, several senders (MAF's dedupe)
                key = self._fresh("sem")
                self.keys.append(key)
                body = {"content": f"capture {key}", "path": f"sim/{key}", "scope": scope,
                        "semantic_key": f"maf-capture:{key}", "dedupe": True}
                for worker in self._senders(2):
                    ops.append(self._capture(worker, route="remember", key=key, body=dict(body), via="none"))
            elif roll < 0.7:  # a plain append: never deduplicated
                name = self._fresh("event")
                worker = self.rng.randrange(len(self.workers))
                ops.append(self._capture(worker, route="timeline_event", key=None, via="none",
                                         body={"content": f"event {name}", "path": f"sim/{name}", "scope": scope}))
            else:
                worker = self.rng.randrange(len(self.workers))
                max_items, max_tokens = self.rng.randint(1, 6), self.rng.choice((3, 12, 40, 200, 1200))
                query = " ".join(self.rng.sample(_WORDS, 3))
                ops.append(PlannedOp(worker=worker, method="POST", path="/v1/recall/context",
                                     body={"query": query, "max_items": max_items, "max_tokens": max_tokens,
                                           "scope": scope},
                                     input={"op": "recall", "actor": self.workers[worker], "max_items": max_items,
                                            "max_tokens": max_tokens}))
        return Batch(clock_ms=None, ops=tuple(ops))

    def census(self) -> Batch:
        """Per key, how many memories sit under its private path (read by the first worker)."""
        return Batch(clock_ms=None, ops=tuple(
            PlannedOp(worker=0, method="GET", path=f"/v1/memories/search?query=*&path=sim/{key}&limit=100",
                      body=None, input={"op": "census", "actor": self.workers[0], "key": key})
            for key in self.keys or ()))
