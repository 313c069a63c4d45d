"""The request stream of a differential run: the concrete step, its actors and routes.

A ``Step`` is one request, written down completely: who sends it (an actor's label, never a
token), the method, the route template it exercises, the path and raw query, and the body
(JSON, or raw bytes for malformed input). Values a side must fill in itself are placeholders:
``$project``, ``$project2``, ``$project3`` (this episode's projects), ``$epoch`` (the epoch
the side minted for ``$project``) and ``$ns`` (the episode's namespace, inside command ids).
Everything else is literal, so a recorded sequence replays, and shrinks, without the generator
(``generator`` draws the steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.profiles.aidememo.routes import TYPED_WRITES

__all__ = ["ACTORS", "BAD_TOKEN", "CLOCK_ROUTE", "MCP_ROUTE", "NO_TOKEN", "P", "ROUTES", "Step"]

# Who sends: label -> (project placeholder, role). "anon" sends no token, "bad" a token nobody holds.
ACTORS: dict[str, tuple[str, str]] = {
    "sender": ("$project", "writer"), "receiver": ("$project", "writer"), "outsider": ("$project", "writer"),
    "reader": ("$project", "reader"), "other_project": ("$project2", "writer"),
    "other_tenant": ("$project3", "writer"),
}
NO_TOKEN, BAD_TOKEN = "anon", "bad"

P = "/v1/projects/{project}"
CLOCK_ROUTE = "POST /__test__/clock"
ROUTES: tuple[str, ...] = (
    "POST /v1/commands",
    *(f"POST {P}/{route.path.replace('{handoff_id}', '{handoff}')}" for route in TYPED_WRITES),
    f"GET {P}/resources/{{kind}}/{{id}}", f"GET {P}/snapshot", f"GET {P}/changes", f"GET {P}/changes/materialized",
    f"GET {P}/handoffs", f"GET {P}/handoffs/{{handoff}}", f"GET {P}/search", f"GET {P}/identity", "GET /health",
)
MCP_ROUTE = f"POST {P}/mcp"


@dataclass(frozen=True, slots=True)
class Step:
    """One request of the stream, replayable as written."""

    actor: str  # a label of ACTORS, NO_TOKEN or BAD_TOKEN
    method: str
    route: str  # the route template, for reports and the requirement map
    path: str  # may hold $project placeholders
    query: str = ""  # raw query string (already encoded), may hold $epoch
    body: Any = None  # JSON value (placeholders inside strings), or None
    raw_body: str | None = None  # malformed bodies, sent as these bytes
    headers: tuple[tuple[str, str], ...] = ()
    note: str = ""  # what the step tries, for the reader of a report

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"actor": self.actor, "method": self.method, "route": self.route, "path": self.path}
        for key in ("query", "body", "raw_body", "headers", "note"):
            value = getattr(self, key)
            if value:
                out[key] = [list(pair) for pair in value] if key == "headers" else value
        return out

    @classmethod
    def of(cls, data: dict[str, Any]) -> Step:
        return cls(actor=str(data["actor"]), method=str(data["method"]), route=str(data["route"]),
                   path=str(data["path"]), query=str(data.get("query", "")), body=data.get("body"),
                   raw_body=data.get("raw_body"), headers=tuple((str(k), str(v)) for k, v in data.get("headers", ())),
                   note=str(data.get("note", "")))
