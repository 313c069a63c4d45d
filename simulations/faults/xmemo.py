"""Faults under the XMemo races (``aidememo-sim xmemo run --config target.toml --faults ...``).

The XMemo campaign (``simulations.xmemo.campaign``) runs against the served XMemo server through the
fault proxy, its batches numbered as the schedule's: kills and pauses of the ``[serve]`` process,
answers of captures and recalls lost or reset by the proxy. What recovery means there: a capture
sent with an idempotency key is retried once, identically, after a lost answer, and must not make
a second memory; the campaign's own checks (one memory per key at the census, appends apart,
recall bounds) hold whatever the faults. Beside them, the nemesis's audit in XMemo's terms:
after each restart a sample of the keyed captures answered so far is sent again, identically, and
at the end all of them (up to the newest 5,000); each must answer 200 with the memory it named
then (XM-IDEM-1). XMemo has no test clock and no change feed, so a fault kind that moves a clock
or an audit that reads a feed does not apply here.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from simulations.errors import SimulationError
from simulations.faults.nemesis import FINAL_RESEND_LIMIT, RESEND_SAMPLE, Call, FaultFinding, FaultTarget, Nemesis
from simulations.faults.nemesis import Server, operation_kind
from simulations.faults.proxy import FaultProxy
from simulations.faults.run import Batches, FaultRun
from simulations.faults.schedule import FaultSchedule
from simulations.linearizability.checker import Verdict
from simulations.xmemo.campaign import XMemoRun, run_campaign
from simulations.xmemo.targets import AGENTS, XMemoHttpTarget

__all__ = ["XMEMO_FAULTS", "refuse_faults", "run_xmemo_faults", "xmemo_target"]

XMEMO_FAULTS = ("kill", "pause", "drop-answers", "reset")  # what applies to an XMemo server
_CAPTURES = ("/v1/remember", "/v1/timeline/events")
_KEY_HEADERS = ("idempotency-key", "x-idempotency-key")
_SENT_HEADERS = ("content-type", *_KEY_HEADERS)  # what a resend repeats; the client adds key and agent


def refuse_faults(kinds: Sequence[str]) -> None:
    """Fault kinds that cannot apply to an XMemo server are refused before anything starts.

    Raises:
        SimulationError: one line naming the kind and why.
    """
    for kind in kinds:
        if kind not in XMEMO_FAULTS:
            raise SimulationError(f"--faults {kind} does not apply to xmemo run: XMemo has no test clock or other "
                                  f"hook for it (the kinds here are {', '.join(XMEMO_FAULTS)})")


def xmemo_target(path: Path, environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, str], float]:
    """(URL, a fresh key per agent, timeout) of the XMemo target file ``path``: both keys of one
    fresh owner, from the file's ``[provision] command``; its values read under ``environ``
    (default this process's; ``targets.served_apart`` gives one naming a shard's own server).

    Raises:
        SimulationError: a bad file, one naming another profile or no URL, or a failed bootstrap.
    """
    from conformance.errors import ConfigError, Untestable
    from conformance.installed import resolve_run
    from conformance.profiles.xmemo.settings import READ_WRITE, XMemoSettings
    from conformance.provisioning import CommandProvisioner
    from conformance.settings import SettingsInput

    try:
        profile, settings = resolve_run(SettingsInput(flags={"config": str(path)},
                                                      environ=os.environ if environ is None else environ))
    except ConfigError as exc:
        raise SimulationError(str(exc)) from None
    if profile.name != "xmemo":
        raise SimulationError(f"{path}: names profile {profile.name!r}, not an XMemo target (profile = \"xmemo\")")
    view = XMemoSettings.of(settings)
    if view.url is None or view.provision_command is None:
        raise SimulationError(f"{path}: xmemo run needs the server's url (or [serve]) and a [provision] command, "
                              "with which it bootstraps a fresh owner's keys")
    owner = f"sim-{secrets.token_hex(4)}"
    provisioner = CommandProvisioner(view.provision_command)
    try:
        keys = {agent: provisioner.provision({"owner": owner, "project": owner, "scopes": READ_WRITE},
                                             f"xmemo-{secrets.token_hex(24)}") for agent in AGENTS}
    except Untestable as exc:
        raise SimulationError(str(exc)) from None
    finally:
        provisioner.close()  # its token files hold live keys
    return view.url, keys, view.timeout_s


@dataclass(frozen=True, slots=True)
class _Capture:
    """An answered capture sent with an idempotency key: what to send again, and what it named."""

    agent: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    memory: str
    sent_s: float


class _Calls(FaultTarget):
    """The nemesis's view of an XMemo campaign: every request's time and outcome (the plots), the
    writes that trigger a kill or pause, and the keyed captures answered (the audits)."""

    def __init__(self, url: str, keys: Mapping[str, str], *, started: float) -> None:
        super().__init__(url, "xmemo", keys, timeout_s=10.0, started=started)
        self.captures: list[_Capture] = []
        self._answered_writes: list[float] = []
        self._seen = threading.Lock()

    def first_answer_after(self, at_s: float) -> float | None:
        with self._seen:
            return next((s for s in self._answered_writes if s > at_s), None)

    def wrote(self) -> None:
        """A write is being sent: a kill or pause armed for this batch may fall here."""
        self._count_write()

    def seen(self, agent: str, request: httpx.Request, answer: httpx.Response | None, begin: float) -> None:
        method, path = request.method, request.url.path
        outcome = "lost" if answer is None else str(answer.status_code)
        with self._seen:
            self.calls.append(Call(begin, time.monotonic() - self.started, operation_kind(method, path), outcome))
            if answer is None or answer.status_code != 200 or method != "POST":
                return
            self._answered_writes.append(begin)
            memory = _memory(answer.content)
            headers = tuple((k, v) for k, v in request.headers.items() if k.lower() in _SENT_HEADERS)
            keyed = any(k.lower() in _KEY_HEADERS for k, _ in headers) or b'"idempotency_key"' in request.content
            if path in _CAPTURES and keyed and memory is not None:
                self.captures.append(_Capture(agent, path, headers, request.content, memory, begin))


class _Seeing(httpx.BaseTransport):
    """One agent's transport: counts its writes for the nemesis and tells ``_Calls`` how each went."""

    def __init__(self, calls: _Calls, agent: str) -> None:
        self.calls, self.agent = calls, agent
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        begin = time.monotonic() - self.calls.started
        if request.method == "POST":
            self.calls.wrote()
        answer = None
        try:
            answer = self.inner.handle_request(request)
            answer.read()
            return answer
        finally:
            self.calls.seen(self.agent, request, answer, begin)

    def close(self) -> None:
        self.inner.close()


def _memory(raw: bytes) -> str | None:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    memory = doc.get("id") or doc.get("memory_id") if isinstance(doc, dict) else None
    return memory if isinstance(memory, str) else None


@dataclass(slots=True)
class _Audits:
    """The nemesis around each batch, and the keyed captures sent again after each restart."""

    nemesis: Nemesis
    calls: _Calls
    direct: XMemoHttpTarget  # the server itself, not through the proxy
    findings: list[FaultFinding] = field(default_factory=list)

    def before(self, batch: int) -> None:
        self.nemesis.before(batch)

    def after(self, batch: int) -> bool:
        stop = self.nemesis.after(batch)
        fault = self.nemesis.schedule.at(batch)
        if fault is not None and fault.kind == "kill":
            rng = random.Random(f"resend:{self.nemesis.schedule.seed}:{batch}")
            earlier = list(self.calls.captures)
            self.resend(rng.sample(earlier, min(RESEND_SAMPLE, len(earlier))), f"after the restart in batch {batch}")
        return stop or bool(self.findings)

    def resend(self, captures: Sequence[_Capture], when: str) -> None:
        for capture in captures:
            try:
                answer = self.direct.client(capture.agent).post(capture.path, content=capture.body,
                                                                headers=dict(capture.headers))
            except httpx.HTTPError as exc:
                self._note(f"{when}: a keyed capture sent again got no answer ({type(exc).__name__})")
                continue
            memory = _memory(answer.content) if answer.status_code == 200 else None
            if memory != capture.memory:
                self._note(f"{when}: a capture with key {_key(capture)} named memory {capture.memory}; sent again "
                           f"identically it answered {answer.status_code} {answer.text[:200]!r}")

    def _note(self, text: str) -> None:
        if not self.findings:  # the first says enough
            self.findings.append(FaultFinding("keyed captures survive restarts", ("XM-IDEM-1",), text))


def _key(capture: _Capture) -> str:
    for name, value in capture.headers:
        if name.lower() in _KEY_HEADERS:
            return value
    try:
        doc = json.loads(capture.body)
    except ValueError:
        return "?"
    return str(doc.get("idempotency_key")) if isinstance(doc, dict) else "?"


def run_xmemo_faults(*, url: str, keys: Mapping[str, str], timeout_s: float, server: Server | None,
                     kinds: tuple[str, ...], seed: int, budget_s: float, max_batches: int | None,
                     started: float, progress: Callable[[str], None] | None = None,
                     keep: frozenset[int] | None = None,
                     on_batch: Callable[[float, int], None] | None = None) -> FaultRun:
    """The XMemo campaign on ``url`` behind a fault proxy, ``kinds`` injected from ``seed``
    (``keep``: only the faults of these batches, a shrunk schedule; ``on_batch(seconds,
    operations)``: told of every batch)."""
    servers = () if server is None else (server, *server.others)
    proxy = FaultProxy(*([s.url for s in servers] or [url])).start()
    calls = _Calls(proxy.url, keys, started=started)
    target = XMemoHttpTarget(proxy.url, keys, timeout_s=timeout_s, transport=lambda agent: _Seeing(calls, agent))
    direct = XMemoHttpTarget(url, keys, timeout_s=timeout_s)
    nemesis = Nemesis(schedule=FaultSchedule(seed, kinds, servers=len(servers) or 1, keep=keep), target=calls,
                      proxy=proxy, servers=servers)
    audits = _Audits(nemesis, calls, direct)
    try:
        run = run_campaign(seed=seed, budget_s=budget_s, max_batches=max_batches, target=target, hooks=audits,
                           progress=progress, on_batch=on_batch)
        audits.resend(calls.captures[-FINAL_RESEND_LIMIT:], "at the end")
    finally:
        direct.close()
        proxy.close()
    nemesis.measure_recoveries()
    findings = [FaultFinding(f.kind, (f.requirement,), f.explanation) for f in run.findings[:1]]
    findings += nemesis.findings + audits.findings
    answered, failed, indeterminate = _outcomes(run)
    batches = Batches(run.batches - 1, run.elapsed_s)  # the census is no batch of the schedule
    return FaultRun(batches, nemesis, answered, failed, indeterminate, Verdict.ILLEGAL if findings else Verdict.OK,
                    tuple(findings), started)


def _outcomes(run: XMemoRun) -> tuple[int, int, int]:
    counts = [0, 0, 0]  # answered 200, answered otherwise, indeterminate
    for op in run.history:
        counts[2 if op.output is None else 0 if op.output.get("http") == 200 else 1] += 1
    return counts[0], counts[1], counts[2]
