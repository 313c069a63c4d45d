"""The state machines' connection to a ledger: one target, actors renamed where the target's own
ids differ, and the target's clock when it can be moved."""

from __future__ import annotations

import atexit
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aidememo_wire.shapes import error_detail
from simulations.machines._hot import query
from simulations.plan import READER
from simulations.targets import EmbeddedTarget, HttpTarget, LedgerFactory, Lost, Target, reference_factory

__all__ = ["ACTORS", "WRITERS", "Wire"]

WRITERS = ("agent-a", "agent-b", "agent-c")
ACTORS = (*WRITERS, READER)


def _rename(value: Any, names: Mapping[str, str]) -> Any:
    if not names:
        return value
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


@dataclass(slots=True)
class Wire:
    """One target, one project; requests answer ``(status, error code, JSON document)``."""

    target: Target
    prefix: str  # inside every id an example creates: earlier data on the server never matters
    names: Mapping[str, str] = field(default_factory=dict)  # machine actor name -> target actor id
    shared: bool = False  # the target outlives this wire (an embedded ledger kept for later examples)

    @property
    def project(self) -> str:
        return self.target.project

    @property
    def can_move_clock(self) -> bool:
        return isinstance(self.target, EmbeddedTarget)

    def now_ms(self) -> int | None:
        return self.target.now_ms() if self.can_move_clock else None

    def advance(self, ms: int) -> None:
        now = self.target.now_ms()
        assert now is not None
        self.target.set_clock(now + ms)

    def request(self, actor: str, method: str, path: str, body: Mapping[str, Any] | None = None,
                params: Mapping[str, object] | None = None) -> tuple[int, str | None, Any]:
        if params:
            path += "?" + query(params)  # urlencode, for the common words without its quoting: _hot
        data = None if body is None else json.dumps(_rename(dict(body), self.names)).encode()
        try:
            reply = self.target.request(actor, method, path, data)
        except Lost as exc:
            raise AssertionError(f"{actor} {method} {path}: no answer ({exc})") from exc
        doc = reply.json()
        if self.names:
            doc = _rename(doc, {v: k for k, v in self.names.items()})
        detail = error_detail(doc)
        return reply.status, detail["code"] if detail is not None else None, doc

    def close(self) -> None:
        if not self.shared:
            self.target.close()

    @staticmethod
    def embedded(factory: LedgerFactory = reference_factory) -> Wire:
        """The reference in-process on a manual clock; ``factory`` builds a variant of it.

        One ledger per factory serves every example of a run, each in a fresh project (projects
        share nothing), which spares creating a database per example.
        """
        target = _EMBEDDED.get(factory)
        if target is None:
            target = _EMBEDDED[factory] = EmbeddedTarget(WRITERS, seed=0, factory=factory)
        else:
            target.next_project()
        return Wire(target, prefix="x", shared=True)


    @staticmethod
    def over_http(url: str, project: str, tokens: Mapping[str, str]) -> Wire:
        """Tokens by actor id: three writers and a reader named ``observer``, or any three writer
        ids plus ``observer`` (the machine calls the writers agent-a, -b, -c in id order)."""
        writers = sorted(a for a in tokens if a != READER)
        if len(writers) < 3 or READER not in tokens:
            raise ValueError("the state machines need three writer tokens and a reader token ('observer')")
        names = dict(zip(WRITERS, writers[:3]))
        by_machine = {machine: tokens[real] for machine, real in names.items()} | {READER: tokens[READER]}
        return Wire(HttpTarget(url, project, by_machine), prefix=f"x{secrets.token_hex(4)}",
                    names={k: v for k, v in names.items() if k != v})


_EMBEDDED: dict[LedgerFactory, EmbeddedTarget] = {}


def _close_embedded() -> None:
    for target in _EMBEDDED.values():
        target.close()
    _EMBEDDED.clear()


atexit.register(_close_embedded)
