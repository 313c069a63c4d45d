"""The started AideMemo target of one pytest process: its wire, provisioner and capability claims.

Built lazily the first time a check runs, so loading the plugin costs nothing when no check is
collected; each xdist worker builds its own (with the embedded reference, its own server and
database).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from conformance.capabilities import Claims, settle
from conformance.errors import ConfigError, NotScored, TargetError, Untestable
from conformance.http import Exchange, Wire, health_answer
from conformance.profile import StartContext
from conformance.profiles.aidememo.leases import LeaseMode, LeaseWait
from conformance.pool import Pending, ProvisionPool
from conformance.provisioning import CommandProvisioner, FunctionProvisioner, Provisioner, TokenList
from conformance.profiles.aidememo.settings import AideMemoSettings
from conformance.transcript import Transcript
from conformance.world import new_credential

__all__ = ["AideMemoTarget", "advance_clock", "start"]

CLOCK_PATH = "/__test__/clock"
POOL_WORKERS = 3  # bootstrap processes at once
POOL_AHEAD = 8  # identities provisioned ahead and not yet asked for (a few checks' worth)


def storage_failure(exchange: Exchange) -> str | None:
    """``503 storage_failure`` is indeterminate and retryable (ERRATA 7)."""
    if exchange.status == 503 and exchange.error_code() == "storage_failure":
        return "503 storage_failure"
    return None


@dataclass(slots=True)
class AideMemoTarget:
    """What every check of this process shares."""

    settings: AideMemoSettings
    wire: Wire
    # The embedded reference answers most checks in-process (``wire``); checks marked
    # ``real_http`` go over its socket (``socket_wire``). None: ``wire`` is the socket already.
    socket_wire: Wire | None = field(default=None, kw_only=True)
    provisioner: Provisioner | None  # None: identities come from the fixed token list
    fixed_tokens: TokenList
    base_url: str
    binds_tokens: bool = False  # provisioning can bind a token to a source and actor (mcp-bindings)
    claims: Claims = field(default_factory=Claims)
    health: object = None  # its answer to GET /health when it started, for the reports
    lease_mode: LeaseMode | None = None  # how lease expiry is observed; None: it is not
    lease_wait: LeaseWait = field(default_factory=LeaseWait)
    pool: ProvisionPool | None = None  # a command provisioner's identities, provisioned ahead
    pool_fed: bool = False  # the pool was told what this process's checks will ask for
    # The process's shared identities (``isolation``), by their template values, once provisioned or on their way.
    shared: dict[tuple[tuple[str, str], ...], Pending] = field(default_factory=dict)
    _stack: ExitStack = field(default_factory=ExitStack)

    def claimed(self, capability: str) -> bool:
        return self.claims.claimed(capability)

    def require(self, capability: str) -> None:
        self.claims.require(capability)

    def wire_for(self, real_http: bool) -> Wire:
        """The wire a check speaks over: the socket when its answers depend on HTTP's bytes."""
        return self.socket_wire if real_http and self.socket_wire is not None else self.wire

    def close(self) -> None:
        self.wire.close()
        if self.socket_wire is not None:
            self.socket_wire.close()
        self._stack.close()


def _load_factory(spec: str) -> Callable[[str], Any]:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"embedded factory {spec!r}: {exc}") from None
    return cast(Callable[[str], Any], factory)


def start_embedded(settings: AideMemoSettings, stack: ExitStack) -> tuple[str, Provisioner, Any]:
    try:
        import aidememo_ref
    except ImportError as exc:  # pragma: no cover - the kit ships the reference
        raise ConfigError(f"no URL given and the embedded reference is unavailable: {exc}") from None
    workdir = tempfile.mkdtemp(prefix="aidememo-embedded-")
    stack.callback(shutil.rmtree, workdir, True)
    db_path = str(Path(workdir) / "ledger.sqlite")
    if settings.embedded_factory:
        ledger = _load_factory(settings.embedded_factory)(db_path)
    elif settings.embedded_backend == "postgres":
        url = os.environ.get("AIDEMEMO_POSTGRES_URL")
        if not url:
            raise ConfigError("the embedded reference on PostgreSQL reads its database URL from AIDEMEMO_POSTGRES_URL, "
                              "which is not set")
        try:
            ledger = aidememo_ref.ReferenceLedger(postgres_url=url, clock=aidememo_ref.OffsetClock(), test_clock=True)
        except Exception as exc:  # an unreachable server or a foreign schema: one line (the URL is never shown)
            raise ConfigError(f"the embedded reference could not open PostgreSQL: {exc}") from None
    else:
        ledger = aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)
    stack.callback(ledger.close)
    try:
        base_url = stack.enter_context(aidememo_ref.serve_in_thread(ledger))
    except (RuntimeError, OSError) as exc:
        raise ConfigError(f"the embedded reference server did not start: {exc}") from None

    def provision(identity: Mapping[str, str], token: str) -> bool:
        ledger.provision(tenant_id=identity["tenant"], project_id=identity["project"], actor_id=identity["actor"],
                         token=token, role=identity["role"])
        if "bind_source" in identity:
            ledger.bind_token(token, identity["bind_source"], identity["bind_actor"])
        return True

    transport = getattr(ledger, "transport", None)  # a factory's ledger may offer none: the socket then
    return base_url, FunctionProvisioner(provision, "the embedded reference"), transport() if transport else None


class _Binding:
    """Identities with a ``bind_source`` through the bound template, the others through the general one."""

    def __init__(self, general: Provisioner, bound: Provisioner) -> None:
        self._general, self._bound = general, bound

    def provision(self, identity: Mapping[str, str], token: str) -> str:
        return (self._bound if "bind_source" in identity else self._general).provision(identity, token)

    def close(self) -> None:
        self._general.close()
        self._bound.close()


def _hook_provisioner(config: Any) -> Provisioner:
    def provision(identity: Mapping[str, str], token: str) -> object:
        return config.hook.pytest_aidememo_provision(config=config, tenant=identity["tenant"],
                                                     project=identity["project"], actor=identity["actor"],
                                                     role=identity["role"], token=token)

    return FunctionProvisioner(provision, "no pytest_aidememo_provision implementation")


def start(context: StartContext) -> AideMemoTarget:
    """Start (embedded) or reach (URL) the target and settle its capability claims.

    Raises:
        ConfigError: the target cannot be started as configured.
    """
    settings = AideMemoSettings.of(context.settings, context.config)
    stack = ExitStack()
    pool: ProvisionPool | None = None
    try:
        provisioner: Provisioner | None = None
        transport = None
        if settings.embedded:
            base_url, provisioner, transport = start_embedded(settings, stack)
        else:
            base_url = settings.url or ""
            if settings.provision_hook:
                provisioner = _hook_provisioner(context.config)
            elif settings.provision_command:
                provisioner = CommandProvisioner(settings.provision_command)
                stack.callback(provisioner.close)
                if settings.provision_bound_command:
                    bound = CommandProvisioner(settings.provision_bound_command)
                    stack.callback(bound.close)
                    provisioner = _Binding(provisioner, bound)
                # A process per identity: run them concurrently and ahead (closed before the
                # token files go). Threads wait on processes, so more of them than cores helps.
                pool = ProvisionPool(provisioner, lambda: new_credential("tok-"), workers=POOL_WORKERS,
                                     ahead=POOL_AHEAD)
                stack.callback(pool.close)
        wire = Wire(base_url, timeout_s=settings.timeout_s, max_body_bytes=settings.max_body_bytes,
                    retryable=storage_failure, transport=transport)
        socket_wire = None if transport is None else Wire(
            base_url, timeout_s=settings.timeout_s, max_body_bytes=settings.max_body_bytes, retryable=storage_failure)
    except BaseException:
        stack.close()
        raise
    # The embedded reference binds tokens; a served target, through its bound template only.
    binds = settings.embedded or bool(settings.provision_bound_command and settings.provision_command)
    target = AideMemoTarget(settings=settings, wire=wire, provisioner=provisioner,
                            fixed_tokens=settings.fixed_tokens, base_url=base_url, binds_tokens=binds, pool=pool,
                            socket_wire=socket_wire, _stack=stack)
    def detect(name: str) -> tuple[bool, str]:
        if name == "mcp-bindings":  # a kit extension: only its provisioning can say whether it binds tokens
            return binds, ("its provisioning binds tokens (the embedded reference, or provision.bound_command)" if binds
                           else "the suite cannot bind this target's tokens (no provision.bound_command)")
        if name == "large-projects":  # a tier, not a route: it costs 10,001 writes, so only a claim runs it
            return False, "not probed: claim it with --capability large-projects (10,001 writes, about 20 s)"
        return _detect(wire, name)

    target.claims = settle(settings.capabilities, context.capabilities, detect)
    target.health = health_answer(wire)
    if settings.real_time_leases:
        target.lease_mode = LeaseMode.REAL
    elif target.claims.claimed("test-clock"):
        target.lease_mode = LeaseMode.VIRTUAL
    return target


_PROBE_PROJECT = "/v1/projects/capability-probe"
_PROBES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "leases": ("POST", f"{_PROBE_PROJECT}/handoffs/probe/heartbeat", {"json_body": {}}),
    "replica-feeds": ("GET", f"{_PROBE_PROJECT}/snapshot", {}),
    "search": ("GET", f"{_PROBE_PROJECT}/search", {"params": {"q": "probe"}}),
    "mcp": ("POST", f"{_PROBE_PROJECT}/mcp", {"json_body": {}}),
    "artifacts": ("GET", f"{_PROBE_PROJECT}/artifacts/resolve", {"params": {"path": "/probe"}}),
    # Concurrent traffic needs nothing but the core routes: claimed unless declared absent.
    "concurrency": ("POST", "/v1/commands", {"json_body": {}}),
}


def _detect(wire: Wire, capability: str) -> tuple[bool, str]:
    """Harmless probes: a route exists when the framework does not answer its bare 404/405 (ERRATA 8)."""
    if capability == "test-clock":
        return _clock_served(wire)
    method, path, kwargs = _PROBES[capability]
    try:
        exchange = wire.request(None, method, path, **kwargs)
    except TargetError as exc:
        return False, f"probe failed: {exc}"
    if exchange.status in (404, 405) and exchange.error_code() is None:
        return False, f"probe {method} {path} answered {exchange.status}"
    return True, f"probe {method} {path} answered {exchange.status}"


def _clock_served(wire: Wire) -> tuple[bool, str]:
    try:
        exchange = wire.request(None, "GET", CLOCK_PATH)
    except TargetError as exc:
        return False, f"probe failed: {exc}"
    try:
        ok = exchange.status == 200 and isinstance(exchange.json().get("now_ms"), int)
    except (AssertionError, AttributeError):
        ok = False
    return ok, f"probe GET {CLOCK_PATH} answered {exchange.status}"


def advance_clock(wire: Wire, transcript: Transcript, advance_ms: int, *, hold: bool = False,
                  cleanup: bool = False) -> int:
    """Move the target's virtual clock (the ``test-clock`` extension); returns the new now_ms.
    ``hold``: the clock then stands still there until the next move (the extension's ``hold``);
    ``cleanup``: a replay sends this move even when it stops before it (a held clock's release).

    Raises:
        NotScored: the target refused a hold (a test clock that cannot stand still).
        Untestable: the move failed.
    """
    body: dict[str, object] = {"advance_ms": advance_ms, "hold": True} if hold else {"advance_ms": advance_ms}
    exchange = wire.request(transcript, "POST", CLOCK_PATH, json_body=body)
    if cleanup:
        exchange.cleanup.append(True)
    if hold and exchange.status == 400:
        raise NotScored(f'the target\'s test clock cannot hold still (a move with "hold": true answered 400), '
                        "and one millisecond cannot be hit over HTTP on a running clock")
    if exchange.status != 200:
        raise Untestable(f"advancing the test clock answered {exchange.status}")
    now = exchange.json().get("now_ms")
    if not isinstance(now, int):
        raise Untestable("advancing the test clock returned no integer now_ms")
    return now
