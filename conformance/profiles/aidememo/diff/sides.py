"""The two sides of a differential run: the target and the kit's reference, behind one small interface.

The reference side is a fresh ``ReferenceLedger`` in this process, answering through
``ledger.handle`` (no socket). The target side is a ``Wire`` to the target's URL with the run's
provisioner; without a URL, the embedded target (the reference, or a broken variant from
``--embedded-factory``) runs in a child process of its own (``child``), so a variant's patches
of the reference's modules never reach the reference this process compares against.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from conformance.errors import ConfigError, TargetError, Untestable
from conformance.http import Wire
from conformance.profiles.aidememo.settings import AideMemoSettings
from conformance.profiles.aidememo.target import CLOCK_PATH, storage_failure
from conformance.provisioning import CommandProvisioner, Provisioner

__all__ = ["Raw", "ReferenceSide", "Side", "TargetSide", "fresh_token"]

Raw = tuple[int, list[tuple[str, str]], bytes]
PARALLEL_PROVISIONING = 3  # bootstrap commands at a time


def fresh_token() -> str:
    return "tok-" + secrets.token_urlsafe(24)


class Side(Protocol):
    """One server the stream is sent to."""

    clock: bool  # serves the test-clock extension

    def provision_all(self, identities: Sequence[tuple[Mapping[str, str], str]]) -> list[str]:
        """Provision each identity with its token; the credentials to use, in order."""
        ...

    def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Raw: ...

    def close(self) -> None: ...


class ReferenceSide:
    """The kit's reference, in this process, with the test clock."""

    clock = True

    def __init__(self) -> None:
        import aidememo_ref

        self._dir = tempfile.mkdtemp(prefix="aidememo-diff-ref-")
        self.ledger = aidememo_ref.ReferenceLedger(str(Path(self._dir) / "ledger.sqlite"),
                                                   clock=aidememo_ref.OffsetClock(), test_clock=True)

    def provision_all(self, identities: Sequence[tuple[Mapping[str, str], str]]) -> list[str]:
        for identity, token in identities:
            self.ledger.provision(tenant_id=identity["tenant"], project_id=identity["project"],
                                  actor_id=identity["actor"], token=token, role=identity["role"])
        return [token for _, token in identities]

    def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Raw:
        response = self.ledger.handle(method, target, headers, body)
        return response.status, list(response.headers), response.body

    def close(self) -> None:
        self.ledger.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class TargetSide:
    """The target over HTTP, provisioned through the run's provisioner."""

    def __init__(self, wire: Wire, provisioners: list[Provisioner], child: subprocess.Popen[str] | None = None) -> None:
        self.wire = wire
        self.provisioners = provisioners
        self.child = child
        self.clock = self._clock_served()

    @classmethod
    def of(cls, settings: AideMemoSettings) -> TargetSide:
        """The target the settings name.

        Raises:
            ConfigError: the target cannot give fresh identities, or its embedded server did not start.
        """
        if settings.embedded:
            base_url, child = _start_child(settings)
            wire = Wire(base_url, timeout_s=settings.timeout_s, max_body_bytes=settings.max_body_bytes,
                        retryable=storage_failure)
            return cls(wire, [_ChildProvisioner(child)], child)
        if not settings.provision_command:
            raise ConfigError("diff needs fresh identities for every episode: give the target a provisioning "
                              "command template ([provision] command or --provision-command); a token list is not enough")
        wire = Wire(settings.url or "", timeout_s=settings.timeout_s, max_body_bytes=settings.max_body_bytes,
                    retryable=storage_failure)
        # One provisioner per actor, so an episode's bootstrap commands run side by side (each
        # keeps its own directory of token files).
        template = settings.provision_command
        return cls(wire, [CommandProvisioner(template) for _ in range(PARALLEL_PROVISIONING)])

    def _clock_served(self) -> bool:
        try:
            exchange = self.wire.request(None, "GET", CLOCK_PATH)
        except TargetError:
            return False
        try:
            return exchange.status == 200 and isinstance(exchange.json().get("now_ms"), int)
        except (AssertionError, AttributeError):
            return False

    def provision_all(self, identities: Sequence[tuple[Mapping[str, str], str]]) -> list[str]:
        if len(self.provisioners) == 1:
            return [self.provisioners[0].provision(identity, token) for identity, token in identities]
        # Two rounds, so no two commands create one tenant or project at once: the first identity
        # of each tenant, then everyone else.
        firsts = {identity["tenant"]: index for index, (identity, _) in reversed(list(enumerate(identities)))}
        credentials: dict[int, str] = {}
        with ThreadPoolExecutor(max_workers=len(self.provisioners)) as pool:
            for round_ in (sorted(firsts.values()), [i for i in range(len(identities)) if i not in firsts.values()]):
                futures = {i: pool.submit(self.provisioners[i % len(self.provisioners)].provision, *identities[i])
                           for i in round_}
                credentials.update({i: future.result() for i, future in futures.items()})
        return [credentials[i] for i in range(len(identities))]

    def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Raw:
        path, _, query = target.partition("?")
        try:
            exchange = self.wire.request(None, method, path, content=body or None, headers=dict(headers),
                                         raw_query=query or None)
        except TargetError as exc:
            # No readable answer (a malformed header, a body past the bound, a reset): status 0 and
            # what went wrong, which the reference's answer then differs from: a divergence, reported.
            return 0, [], json.dumps({"<no answer>": str(exc)}).encode()
        return exchange.status, list(exchange.response_headers), exchange.body

    def close(self) -> None:
        self.wire.close()
        for provisioner in self.provisioners:
            provisioner.close()
        if self.child is not None:
            # End of input first: the child leaves its loop and removes its database as it exits.
            if self.child.stdin is not None:
                self.child.stdin.close()
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.child.terminate()  # it removes its database on SIGTERM too
                try:
                    self.child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.child.kill()


def _start_child(settings: AideMemoSettings) -> tuple[str, subprocess.Popen[str]]:
    args = [sys.executable, "-m", "conformance.profiles.aidememo.diff.child", settings.embedded_factory or "",
            settings.embedded_backend]
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ.copy())
    assert child.stdout is not None
    first = child.stdout.readline().strip()
    if not first.startswith("http"):
        child.kill()
        err = child.stderr.read() if child.stderr is not None else ""
        last = (first or err.strip().splitlines()[-1] if (first or err.strip()) else "no output")
        raise ConfigError(f"the embedded target did not start: {last}")
    return first, child


class _ChildProvisioner:
    """Provisions through the child's stdin (one JSON line each; the token never leaves the pipe)."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        self._in: IO[str] = child.stdin  # type: ignore[assignment]
        self._out: IO[str] = child.stdout  # type: ignore[assignment]

    def provision(self, identity: Mapping[str, str], token: str) -> str:
        self._in.write(json.dumps({"identity": dict(identity), "token": token}) + "\n")
        self._in.flush()
        answer = self._out.readline().strip()
        if answer != "ok":
            raise Untestable(f"the embedded target did not provision {identity.get('actor')}: {answer or 'it exited'}")
        return token

    def close(self) -> None:
        pass
