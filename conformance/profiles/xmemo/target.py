"""The started XMemo target of one pytest process: its wire, provisioners and capability claims.

Built lazily the first time a check runs; each xdist worker builds its own (with the embedded
reference, its own server and database).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from conformance.capabilities import Claims, settle
from conformance.errors import ConfigError, TargetError
from conformance.http import Exchange, Wire, health_answer
from conformance.profile import StartContext
from conformance.provisioning import CommandProvisioner, FunctionProvisioner, Provisioner, TokenList
from conformance.profiles.xmemo.settings import XMemoSettings

__all__ = ["XMemoTarget", "start", "is_read"]


def is_read(method: str, url: str) -> bool:
    """The published clients' notion of a read: any GET, and POST /v1/recall/context (spec §1)."""
    path = url.split("?", 1)[0]
    return method == "GET" or (method == "POST" and path.endswith("/v1/recall/context"))


def unavailable_read(exchange: Exchange) -> str | None:
    """A 503 to a read is indeterminate and worth resending, as clients do; a write is never resent."""
    if exchange.status == 503 and is_read(exchange.method, exchange.url):
        return "503 to a read"
    return None


@dataclass(slots=True)
class XMemoTarget:
    """What every check of this process shares."""

    settings: XMemoSettings
    wire: Wire
    provisioner: Provisioner | None  # plain keys; None: keys come from the fixed list
    bound_provisioner: Provisioner | None  # keys bound to an agent id
    fixed_tokens: TokenList
    base_url: str
    claims: Claims = field(default_factory=Claims)
    health: object = None  # its answer to GET /health when it started, for the reports
    _stack: ExitStack = field(default_factory=ExitStack)

    def require(self, capability: str) -> None:
        self.claims.require(capability)

    def close(self) -> None:
        self.wire.close()
        self._stack.close()


def _start_embedded(settings: XMemoSettings, stack: ExitStack) -> tuple[str, Provisioner]:
    from refkit.serving import serve_in_thread
    from xmemo_ref import XMemoReference

    workdir = tempfile.mkdtemp(prefix="xmemo-embedded-")
    stack.callback(shutil.rmtree, workdir, True)
    database = str(Path(workdir) / "xmemo.sqlite")
    if settings.embedded_factory:
        module_name, _, attribute = settings.embedded_factory.partition(":")
        try:
            reference = getattr(importlib.import_module(module_name), attribute)(database)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"embedded factory {settings.embedded_factory!r}: {exc}") from None
    else:
        reference = XMemoReference(database)
    stack.callback(reference.close)
    try:
        base_url = stack.enter_context(serve_in_thread(reference))
    except (RuntimeError, OSError) as exc:
        raise ConfigError(f"the embedded XMemo reference did not start: {exc}") from None

    def provision(identity: Mapping[str, str], key: str) -> bool:
        reference.provision(owner_id=identity["owner"], key=key, scopes=identity["scopes"].split(","),
                            agent_id=identity.get("agent") or None, project_id=identity.get("project") or None)
        return True

    return base_url, FunctionProvisioner(provision, "the embedded XMemo reference")


def start(context: StartContext) -> XMemoTarget:
    """Start (embedded) or reach (URL) the target and settle its capability claims.

    Raises:
        ConfigError: the target cannot be started as configured.
    """
    settings = XMemoSettings.of(context.settings)
    stack = ExitStack()
    try:
        bound: Provisioner | None = None
        provisioner: Provisioner | None = None
        if settings.url is None:
            base_url, provisioner = _start_embedded(settings, stack)
            bound = provisioner
        else:
            base_url = settings.url
            if settings.provision_command:
                provisioner = CommandProvisioner(settings.provision_command)
                stack.callback(provisioner.close)
            if settings.provision_bound_command:
                bound = CommandProvisioner(settings.provision_bound_command)
                stack.callback(bound.close)
        wire = Wire(base_url, timeout_s=settings.timeout_s, max_body_bytes=settings.max_body_bytes,
                    retryable=unavailable_read)
    except BaseException:
        stack.close()
        raise
    target = XMemoTarget(settings=settings, wire=wire, provisioner=provisioner, bound_provisioner=bound,
                         fixed_tokens=settings.fixed_tokens, base_url=base_url, _stack=stack)
    target.claims = settle(settings.capabilities, context.capabilities, lambda name: _detect(target, name))
    target.health = health_answer(wire)
    return target


_PROBES = {"mcp": "/mcp", "project-context": "/v1/projects/capability-probe/context"}


def _detect(target: XMemoTarget, capability: str) -> tuple[bool, str]:
    """Harmless probes without a credential: a route exists when it does not answer 404 or 405."""
    if capability == "agent-binding":
        if target.bound_provisioner is not None:
            return True, "keys can be bootstrapped bound to an agent"
        listed = any(identity["agent"] for identity in target.fixed_tokens)
        return listed, "a listed key names an agent" if listed else "no way to get a key bound to an agent"
    path = _PROBES[capability]
    try:
        exchange = target.wire.request(None, "POST", path, json_body={})
    except TargetError as exc:
        return False, f"probe failed: {exc}"
    served = exchange.status not in (404, 405)
    return served, f"probe POST {path} answered {exchange.status}"
