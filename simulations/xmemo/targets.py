"""Where the XMemo races run: the XMemo reference (or a planted variant) in-process, with a seeded
scheduler and seeded ids, or an XMemo server by URL with one API key per agent.

Two agents (``claude``, ``codex``) of one owner each run two workers (``WORKERS``): two processes
racing per agent.
"""

from __future__ import annotations

import random
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from simulations.errors import SimulationError
from simulations.scheduler import SeededScheduler

__all__ = ["AGENTS", "WORKERS", "Target", "XMemoEmbeddedTarget", "XMemoFactory", "XMemoHttpTarget",
           "reference_factory"]

AGENTS = ("claude", "codex")
WORKERS = tuple(agent for agent in AGENTS for _ in range(2))  # two workers per agent: two processes racing
OWNER = "sim-owner"

XMemoFactory = Callable[..., Any]  # (database, *, clock, scheduler, new_id) -> XMemoReference


def reference_factory(database: Path, *, clock: Any, scheduler: Any, new_id: Callable[[], str]) -> Any:
    from xmemo_ref import XMemoReference

    return XMemoReference(database, clock=clock, scheduler=scheduler, new_id=new_id)


class XMemoEmbeddedTarget:
    """The XMemo reference (or a planted variant) in-process, with a seeded scheduler and seeded ids."""

    def __init__(self, *, seed: int, factory: XMemoFactory = reference_factory) -> None:
        from refkit.clock import ManualClock

        self._dir = tempfile.TemporaryDirectory(prefix="xmemo-sim-")
        self.scheduler = SeededScheduler(seed)
        ids = random.Random(seed ^ 0x5EED)
        self.reference = factory(Path(self._dir.name) / "xmemo.sqlite", clock=ManualClock(), scheduler=self.scheduler,
                                 new_id=lambda: str(uuid.UUID(int=ids.getrandbits(128), version=4)))
        self.keys = {agent: f"xmemo-sim-key-{agent}-0123456789" for agent in AGENTS}
        for agent, key in self.keys.items():
            self.reference.provision(owner_id=OWNER, key=key)
        self._clients: dict[str, httpx.Client] = {}

    def client(self, agent: str) -> httpx.Client:
        if agent not in self._clients:
            self._clients[agent] = httpx.Client(transport=self.reference.transport(), base_url="http://xmemo.sim",
                                                headers={"x-api-key": self.keys[agent], "x-memory-os-agent-id": agent})
        return self._clients[agent]

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self.reference.close()
        self._dir.cleanup()


class XMemoHttpTarget:
    """An XMemo server by URL: one API key per agent (two keys of one owner, or one shared key)."""

    scheduler: SeededScheduler | None = None  # the network interleaves

    def __init__(self, url: str, keys: Mapping[str, str], *, timeout_s: float = 10.0,
                 transport: Callable[[str], httpx.BaseTransport] | None = None) -> None:
        missing = [agent for agent in AGENTS if agent not in keys]
        if missing:
            raise SimulationError(f"an XMemo URL target needs a key for each of {', '.join(AGENTS)}")
        self.url, self.keys, self._timeout = url.rstrip("/"), dict(keys), timeout_s
        self._transport = transport  # per agent (a fault campaign's, which sees every request)
        self._clients: dict[str, httpx.Client] = {}

    @property
    def timeout_s(self) -> float:
        return self._timeout

    def client(self, agent: str) -> httpx.Client:
        if agent not in self._clients:
            transport = None if self._transport is None else self._transport(agent)
            self._clients[agent] = httpx.Client(base_url=self.url, timeout=self._timeout, transport=transport,
                                                headers={"x-api-key": self.keys[agent], "x-memory-os-agent-id": agent})
        return self._clients[agent]

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients = {}


Target = XMemoEmbeddedTarget | XMemoHttpTarget
