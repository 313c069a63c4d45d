"""One xmemo check's world: fresh owners and keys, a private scope, and the requests checks send.

Every check gets owners nobody else uses (provisioned targets) and a scope of its own, so on a
target with a fixed key list, where checks share owners, a check still reads only what it wrote.
Keys are registered with the transcript as secrets: reports show ``<redacted:label>``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from conformance.answers import parse, wrap
from conformance.errors import NotScored, Untestable
from conformance.expect import depart, shown
from conformance.http import Exchange
from conformance.profile import CheckContext
from conformance.profiles.xmemo.settings import READ_WRITE
from conformance.profiles.xmemo.target import XMemoTarget
from conformance.provisioning import FixedIdentity
from conformance.world import BaseWorld

__all__ = ["XMemoWorld", "Owner", "Key", "BOUNDARY_FIELDS", "TOKEN_BYTES", "estimate_tokens", "identity_fields", "is_uuid",
           "items_of"]

# The seed's object, in its order.
BOUNDARY_FIELDS = ("relation", "ownership", "current_agent_id", "current_agent_trust", "boundary_authority",
                   "memory_agent_id", "explanation")
TOKEN_BYTES = 4  # docs/xmemo.md: the token estimate is ceil(utf8_bytes(context_text) / 4)


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // TOKEN_BYTES)


def is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


@dataclass(slots=True)
class Key:
    """One API key of one owner, and the requests it sends."""

    world: XMemoWorld
    label: str
    secret: str = field(repr=False)
    owner_id: str
    project_id: str | None
    agent_id: str | None  # bound at bootstrap
    scopes: str

    def request(self, method: str, path: str, *, json_body: object = None, content: bytes | None = None,
                agent: str | None = None, instance: str | None = None, bearer: bool = False,
                headers: dict[str, str] | None = None, params: dict[str, object] | None = None) -> Exchange:
        sent = {"Authorization": f"Bearer {self.secret}"} if bearer else {"X-API-Key": self.secret}
        if agent is not None:
            sent["X-Memory-OS-Agent-ID"] = agent
        if instance is not None:
            sent["X-Memory-OS-Agent-Instance-ID"] = instance
        sent.update(headers or {})
        return self.world.target.wire.request(self.world.transcript, method, path, json_body=json_body,
                                              content=content, headers=sent, params=params, actor=self.label)

    def write(self, content: str, *, route: str = "/v1/remember", agent: str | None = None,
              instance: str | None = None, headers: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
        """A capture the check needs as a prerequisite: anything but 2xx with a UUID id is Untestable."""
        body = {"content": content, "scope": self.world.scope, **fields}
        if route.endswith("remember"):
            body.setdefault("path", f"conformance/{self.world.check_tag}")
        exchange = self.request("POST", route, json_body=body, agent=agent, instance=instance, headers=headers)
        exchange.expect("HTTP 2xx with a UUID id (a set-up capture)")
        if not 200 <= exchange.status < 300:
            raise Untestable(f"setup capture failed: {shown(exchange)}")
        data = exchange.json()
        memory_id = data.get("id") or data.get("memory_id") if isinstance(data, dict) else None
        if not is_uuid(memory_id):
            raise Untestable(f"setup capture answered no UUID id: {shown(exchange)}")
        return {**data, "id": memory_id}

    def recall(self, query: str = "what do we know", *, agent: str | None = None, instance: str | None = None,
               scoped: bool = True, **fields: Any) -> Exchange:
        body: dict[str, Any] = {"query": query, "max_items": 20, "max_tokens": 4000, **fields}
        if scoped:
            body.setdefault("scope", self.world.scope)
        return self.request("POST", "/v1/recall/context", json_body=body, agent=agent, instance=instance)

    def mcp(self, method: str, params: dict[str, Any] | None = None, *, agent: str | None = None,
            session: str | None = None) -> tuple[Exchange, dict[str, Any]]:
        """One JSON-RPC call on POST /mcp; the answer's JSON-RPC object, read from JSON or SSE."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.world.rng.randrange(1, 1 << 30), "method": method}
        if params is not None:
            message["params"] = params
        headers = {"Accept": "application/json, text/event-stream"}
        if session is not None:
            headers["mcp-session-id"] = session
        exchange = self.request("POST", "/mcp", json_body=message, agent=agent, headers=headers)
        assert exchange.status == 200, f"MCP {method}: {shown(exchange)}"
        if (exchange.header("content-type") or "").startswith("text/event-stream"):
            events = [parse(line[6:], f"MCP {method} (an SSE event)", exchange)
                      for line in exchange.body.decode("utf-8", "replace").splitlines() if line.startswith("data: ")]
            answers = [e for e in events if isinstance(e, dict) and e.get("id") == message["id"]]
            assert len(answers) == 1, f"MCP {method}: no single SSE event answers id {message['id']}: {shown(exchange)}"
            return exchange, answers[0]
        answer = exchange.json()
        assert isinstance(answer, dict) and answer.get("id") == message["id"], f"MCP {method}: {shown(exchange)}"
        return exchange, answer

    def tool_text(self, name: str, arguments: dict[str, Any] | None = None, *, agent: str | None = None) -> str:
        _, answer = self.mcp("tools/call", {"name": name, "arguments": arguments or {}}, agent=agent)
        result = answer.get("result")
        assert isinstance(result, dict), f"tools/call {name} answered no result: {answer}"
        assert not result.get("isError"), f"tools/call {name} failed: {result}"
        return "\n".join(part.get("text", "") for part in result.get("content", []) if part.get("type") == "text")


@dataclass(slots=True)
class Owner:
    """An owner nobody else uses (or, with a fixed key list, one listed owner)."""

    world: XMemoWorld
    owner_id: str
    listed: list[FixedIdentity] | None = None

    def key(self, label: str, *, scopes: str = READ_WRITE, agent: str | None = None,
            other_project: bool = False) -> Key:
        """A key of this owner: with ``scopes``, bound to ``agent`` when given, in another project when asked."""
        world, target = self.world, self.world.target
        if self.listed is not None:
            return self._listed(label, scopes, agent, other_project)
        provisioner = target.bound_provisioner if agent else target.provisioner
        if provisioner is None:
            raise NotScored("no way to bootstrap a key bound to an agent on this target" if agent
                            else "no way to bootstrap keys on this target")
        secret = world.fresh_credential("xmc-")
        world.transcript.secret(secret, label)
        # The owner's own id is the reference's default project; another project is a second tenant.
        project = f"{self.owner_id}-side" if other_project else self.owner_id
        identity = {"owner": self.owner_id, "project": project, "agent": agent or "", "scopes": scopes}
        world.transcript.identity(label, identity)
        credential = provisioner.provision(identity, secret)
        if credential != secret:
            world.transcript.secret(credential, label)
        return Key(world=world, label=label, secret=credential, owner_id=self.owner_id, project_id=project,
                   agent_id=agent, scopes=scopes)

    def _listed(self, label: str, scopes: str, agent: str | None, other_project: bool) -> Key:
        assert self.listed is not None
        first_project = self.listed[0]["project"]
        for identity in self.listed:
            if identity["scopes"] != scopes or (identity["agent"] or None) != agent:
                continue
            if (identity["project"] != first_project) != other_project:
                continue
            self.world.transcript.secret(identity.token, label)
            return Key(world=self.world, label=label, secret=identity.token, owner_id=self.owner_id,
                       project_id=identity["project"] or None, agent_id=agent, scopes=scopes)
        raise NotScored(f"the target file lists no key of owner {self.owner_id} with scopes {scopes}"
                        + (f", agent {agent}" if agent else "") + (", in another project" if other_project else ""))


@dataclass(slots=True)
class XMemoWorld(BaseWorld):
    """One check's owners, keys and private scope."""

    target: XMemoTarget = field(kw_only=True)
    scope: str = field(kw_only=True)
    _owners: int = 0

    @classmethod
    def build(cls, context: CheckContext) -> XMemoWorld:
        tag = context.run_tag.replace(".", "-")
        world = cls(**BaseWorld.context_fields(context), target=context.target,
                    scope=f"conformance-{tag}-{context.check_tag}")
        world.transcript.minted(world.scope, tag)
        return world

    def owner(self) -> Owner:
        """The next fresh owner of this check (the first, second, ... listed owner with a key list)."""
        self._owners += 1
        if self.target.provisioner is None:
            groups = list(self.target.fixed_tokens.grouped("owner").items())
            if len(groups) < self._owners:
                raise NotScored(f"the target file lists keys of {len(groups)} owner(s); this check needs {self._owners}")
            owner_id, listed = groups[self._owners - 1]
            return Owner(world=self, owner_id=owner_id, listed=listed)
        tag = self.run_tag.replace(".", "-")
        owner_id = f"own-{tag}-{self.check_tag}-{self._owners}"
        self.transcript.minted(owner_id, tag)
        return Owner(world=self, owner_id=owner_id)

    def pair(self) -> tuple[Key, Key]:
        """Two read-write keys of one owner: Claude's and Codex's in the seed."""
        owner = self.owner()
        return owner.key("claude"), owner.key("codex")


def items_of(exchange: Exchange) -> list[dict[str, Any]]:
    """The items of a recall answer, which must be 200 with an ``items`` list."""
    expected = exchange.expect("HTTP 200 with an items list")
    if exchange.status != 200:
        raise depart(exchange, expected, f"recall: {shown(exchange)}")
    data = exchange.json()
    if not (isinstance(data, dict) and isinstance(data.get("items"), list)):
        raise depart(exchange, expected, f"recall answered no items list: {shown(exchange)}")
    return [item for item in data["items"] if isinstance(item, dict)]


def identity_fields(text: str, step: str = "get_mcp_identity") -> dict[str, str]:
    """The ``Name: value`` lines of an identity text, read like an answer (a missing line raises ShapeError)."""
    fields: dict[str, str] = wrap(dict(line.split(": ", 1) for line in text.splitlines() if ": " in line), step)
    return fields
