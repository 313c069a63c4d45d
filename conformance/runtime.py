"""The started target of one pytest process: its wire, provisioner and capability claims.

Built lazily by the ``aidememo_runtime`` fixture the first time a check runs, so loading the
plugin costs nothing when no AideMemo check is collected; each xdist worker builds its own
(with the embedded reference, its own server and database).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.errors import ConfigError, NotScored, TargetError, Untestable
from conformance.target import CommandProvisioner, FixedToken, Provisioner, TargetSettings
from conformance.transcript import Transcript, Wire

__all__ = ["Runtime", "start_runtime"]

CLOCK_PATH = "/__test__/clock"


class _InProcessProvisioner:
    """Provisions on the embedded ledger's SQLite file, as `aidememo-ref bootstrap` would."""

    def __init__(self, provision: Any) -> None:
        self._provision = provision

    def provision(self, *, tenant: str, project: str, actor: str, role: str, token: str) -> None:
        self._provision(tenant_id=tenant, project_id=project, actor_id=actor, token=token, role=role)


@dataclass(slots=True)
class Runtime:
    """What every check of this process shares."""

    settings: TargetSettings
    wire: Wire
    provisioner: Provisioner | None
    fixed_tokens: tuple[FixedToken, ...]
    base_url: str
    claims: dict[str, bool] = field(default_factory=dict)
    detected: dict[str, str] = field(default_factory=dict)  # capability -> how it was decided
    _stack: ExitStack = field(default_factory=ExitStack)

    def claimed(self, capability: str) -> bool:
        return capability == "core" or self.claims.get(capability, False)

    def require(self, capability: str) -> None:
        if not self.claimed(capability):
            how = self.detected.get(capability, "not claimed")
            raise NotScored(f"capability {capability!r} not claimed by the target ({how})")

    def close(self) -> None:
        self.wire.close()
        self._stack.close()


def _load_factory(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"embedded factory {spec!r}: {exc}") from None


def _start_embedded(settings: TargetSettings, stack: ExitStack) -> tuple[str, Provisioner]:
    try:
        import aidememo_ref
    except ImportError as exc:  # pragma: no cover - the kit ships the reference
        raise ConfigError(f"no --aidememo-url given and the embedded reference is unavailable: {exc}") from None
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
    return base_url, _InProcessProvisioner(ledger.provision)


class _HookProvisioner:
    """Provisions through a conftest's ``pytest_aidememo_provision``."""

    def __init__(self, hook: Any, config: Any) -> None:
        self._hook = hook
        self._config = config

    def provision(self, *, tenant: str, project: str, actor: str, role: str, token: str) -> None:
        handled = self._hook.pytest_aidememo_provision(config=self._config, tenant=tenant, project=project,
                                                       actor=actor, role=role, token=token)
        if not handled:
            raise Untestable("no pytest_aidememo_provision implementation handled the identity")


def start_runtime(settings: TargetSettings, *, hook: Any = None, config: Any = None) -> Runtime:
    """Start (embedded) or reach (URL) the target and settle its capability claims.

    Raises:
        ConfigError: the target cannot be started as configured.
    """
    stack = ExitStack()
    try:
        if settings.embedded:
            base_url, provisioner = _start_embedded(settings, stack)
        else:
            base_url = settings.url or ""
            provisioner = None
            if hook is not None:
                provisioner = _HookProvisioner(hook, config)
            elif settings.provision_command:
                command = CommandProvisioner(settings.provision_command)
                stack.callback(command.close)
                provisioner = command
        wire = Wire(base_url, timeout_s=settings.timeout_s, max_body_bytes=settings.max_body_bytes)
    except BaseException:
        stack.close()
        raise
    runtime = Runtime(
        settings=settings,
        wire=wire,
        provisioner=provisioner,
        fixed_tokens=settings.fixed_tokens,
        base_url=base_url,
        _stack=stack,
    )
    _settle_capabilities(runtime)
    return runtime


def _route_exists(wire: Wire, method: str, path: str, **kwargs: Any) -> tuple[bool, str]:
    """A route exists when the framework does not answer its bare 404/405 (ERRATA 8)."""
    try:
        exchange = wire.request(None, method, path, **kwargs)
    except TargetError as exc:
        return False, f"probe failed: {exc}"
    if exchange.status in (404, 405) and exchange.error_code() is None:
        return False, f"probe {method} {path} answered {exchange.status}"
    return True, f"probe {method} {path} answered {exchange.status}"


def _settle_capabilities(runtime: Runtime) -> None:
    """Declared claims win; ``auto`` (or unset) capabilities are detected with harmless probes."""
    declared = runtime.settings.capabilities
    probe_project = "/v1/projects/capability-probe"
    probes: dict[str, tuple[str, str, dict[str, Any]]] = {
        "leases": ("POST", f"{probe_project}/handoffs/probe/heartbeat", {"json_body": {}}),
        "replica-feeds": ("GET", f"{probe_project}/snapshot", {}),
        "search": ("GET", f"{probe_project}/search", {"params": {"q": "probe"}}),
        "mcp": ("POST", f"{probe_project}/mcp", {"json_body": {}}),
        "artifacts": ("GET", f"{probe_project}/artifacts/resolve", {"params": {"path": "/probe"}}),
    }
    for capability in ("leases", "test-clock", "replica-feeds", "search", "mcp", "artifacts"):
        claim = declared.get(capability)
        if claim is not None:
            runtime.claims[capability] = claim
            runtime.detected[capability] = "declared" if claim else "declared absent"
            continue
        if capability == "test-clock":
            ok, how = _clock_served(runtime.wire)
        else:
            method, path, kwargs = probes[capability]
            ok, how = _route_exists(runtime.wire, method, path, **kwargs)
        runtime.claims[capability] = ok
        runtime.detected[capability] = f"detected: {how}"


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


def advance_clock(wire: Wire, transcript: Transcript, advance_ms: int) -> int:
    """Move the target's virtual clock (the ``test-clock`` extension); returns the new now_ms."""
    exchange = wire.request(transcript, "POST", CLOCK_PATH, json_body={"advance_ms": advance_ms})
    if exchange.status != 200:
        raise Untestable(f"advancing the test clock answered {exchange.status}")
    now = exchange.json().get("now_ms")
    if not isinstance(now, int):
        raise Untestable("advancing the test clock returned no integer now_ms")
    return now
