"""Concurrent XMemo captures and recalls: seeded batches, one history, the checks of ``xmemo_model``.

Theory of operation. Two agents (``claude``, ``codex``) of one owner each run two workers. A batch
sends, at once: the same capture with one idempotency key from several workers (a client's
outbox replay racing its original, or two agents replaying one shared operation), the same
``semantic_key`` capture from several workers (MAF's dedupe), plain timeline appends, and
recalls with small random bounds. After the last batch a census reads, per key, the key's
private path. Every request is recorded (invoke, then ok or unknown) in a ``History`` that
``xmemo_model.violations`` reads.

On the embedded reference the AideMemo simulator's ``SeededScheduler`` runs one worker at a time
and picks, from the seed, who goes next at each request and at each point the store reports
(``begin`` once it holds the write lock, ``decided``, ``commit``): the same plan and seed give
the same interleaving, so a failure replays. Memory ids come from the seed too. Over a URL the
interleaving is the network's. A capture with a key whose answer was lost (transport error,
5xx) is sent once more, identically, which the key makes safe; recalls are never retried. The
workers, the scheduler and the retry are the AideMemo simulator's own (``execution.run_lanes``,
``execution.settle``); only sending and reading XMemo's answers live here.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import httpx

from refkit.files import write_atomic
from refkit.jsonvalue import loads
from simulations.errors import SimulationError
from simulations.execution import run_lanes, settle
from simulations.linearizability.history import Operation, Recorder
from simulations.plan import SEGMENT_BATCHES, Batch, Plan, PlannedOp, segment_seed
from simulations.plan import batch_seed as _batch_seed  # the one formula, shared with the AideMemo campaign
from simulations.scheduler import SeededScheduler
from simulations.targets import Lost, load_factory, recorded_target, unnamed_code
from simulations.xmemo.model import Finding, describe_operation, estimate_tokens, violations

__all__ = [
    "AGENTS",
    "XMemoEmbeddedTarget",
    "XMemoHttpTarget",
    "XMemoPlanner",
    "XMemoRun",
    "reference_factory",
    "run_campaign",
    "rerun",
    "shrink",
    "export_failure",
    "reproduce",
    "FORMAT",
]

FORMAT = "aidememo-sim-xmemo-replay/1"
AGENTS = ("claude", "codex")
OWNER = "sim-owner"
_WORDS = ("deploy", "adapter", "decision", "transport", "token", "fix", "handoff", "redis", "review", "status")
_KEY_WAYS = ("Idempotency-Key", "X-Idempotency-Key", "body", "all")

XMemoFactory = Callable[..., Any]  # (database, *, clock, scheduler, new_id) -> XMemoReference


def reference_factory(database: Path, *, clock: Any, scheduler: Any, new_id: Callable[[], str]) -> Any:
    from xmemo_ref import XMemoReference

    return XMemoReference(database, clock=clock, scheduler=scheduler, new_id=new_id)


def _workers() -> tuple[str, ...]:
    return tuple(agent for agent in AGENTS for _ in range(2))  # two workers per agent: two processes racing


# -- targets ----------------------------------------------------------------------------------


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


# -- planning ---------------------------------------------------------------------------------


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


# -- execution --------------------------------------------------------------------------------


def _send(client: httpx.Client, op: PlannedOp) -> httpx.Response:
    if op.body is None:
        return client.request(op.method, op.path)
    body, headers = dict(op.body), {"content-type": "application/json"}
    key, via = op.input.get("key"), op.input.get("via")
    if isinstance(key, str) and via != "none":
        if via in ("body", "all"):
            body["idempotency_key"] = key
        for header in ("Idempotency-Key", "X-Idempotency-Key"):
            if via in (header, "all"):
                headers[header] = key
    return client.request(op.method, op.path, content=json.dumps(body).encode(), headers=headers)


def _output(response: httpx.Response, op: PlannedOp) -> dict[str, Any]:
    try:
        doc = loads(response.content)
    except ValueError:  # not JSON, or nested too deep
        doc = None
    out: dict[str, Any] = {"http": response.status_code}
    if response.status_code != 200 or not isinstance(doc, dict):
        out["detail"] = doc.get("detail") if isinstance(doc, dict) else response.text[:200]
        return out
    kind = op.input.get("op")
    if kind == "capture":
        out |= {"id": doc.get("id") or doc.get("memory_id"), "write": doc.get("write"),
                "replayed": response.headers.get("idempotent-replayed") == "true"}
    elif kind == "recall":
        items = doc["items"] if isinstance(doc.get("items"), list) else []
        out |= {"items": len(items), "tokens": estimate_tokens(str(doc.get("context_text") or "")),
                "ids": [str(i.get("id")) for i in items if isinstance(i, dict)]}
    else:
        results = doc["results"] if isinstance(doc.get("results"), list) else []
        out |= {"count": len(results), "ids": [str(r.get("id")) for r in results if isinstance(r, dict)]}
    return out


def _perform(target: Target, op: PlannedOp, recorder: Recorder, worker: int) -> None:
    client = target.client(str(op.input["actor"]))
    ticket = recorder.invoke(worker, dict(op.input))

    def send() -> httpx.Response:
        try:
            return _send(client, op)
        except httpx.ConnectError as exc:
            raise Lost(str(exc), delivered=False) from exc  # refused before anything was sent
        except httpx.HTTPError as exc:
            raise Lost(str(exc)) from exc

    # Only a capture with a key is safe to send again: the key makes the copy a replay.
    settle(recorder, ticket, send, status=lambda response: response.status_code,
           output=lambda response: _output(response, op),
           retry=op.input.get("op") == "capture" and op.input.get("key") is not None)


def execute_batch(target: Target, batch: Batch, recorder: Recorder, seed: int, script: Sequence[int] = ()) -> list[int]:
    """Launch ``batch`` at once, one thread per busy worker; returns the scheduler's decisions.

    Raises:
        SimulationError: when a worker stalls or fails outside the request it was sending.
    """
    return run_lanes(batch, lambda op, worker: _perform(target, op, recorder, worker), target.scheduler, seed, script)


# -- campaigns --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class XMemoRun:
    """One campaign, or its last segment: ``seed``, ``plan`` and ``history`` are the segment's (what
    replays and shrinks alone); ``earlier`` counts the batches and operations of the segments
    before it."""

    seed: int
    plan: Plan
    history: tuple[Operation, ...]
    decisions: tuple[tuple[int, ...], ...]
    findings: tuple[Finding, ...]
    elapsed_s: float
    segment: int = 0
    earlier: tuple[int, int] = (0, 0)

    @property
    def finding(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @property
    def batches(self) -> int:
        """Batches run by the whole campaign, each segment's census included."""
        return self.earlier[0] + len(self.plan.batches)

    @property
    def operations(self) -> int:
        """Operations of the whole campaign."""
        return self.earlier[1] + len(self.history)


class BatchHooks(Protocol):
    """What hears of each batch before and after it (a fault campaign's nemesis); ``after``
    returning True ends the batches (the census still runs)."""

    def before(self, batch: int) -> None: ...

    def after(self, batch: int) -> bool: ...


def run_campaign(*, seed: int, budget_s: float = 10.0, max_batches: int | None = None,
                 factory: XMemoFactory = reference_factory, target: XMemoHttpTarget | None = None,
                 progress: Callable[[str], None] | None = None,
                 on_batch: Callable[[float, int], None] | None = None,
                 segment_batches: int = SEGMENT_BATCHES, hooks: BatchHooks | None = None) -> XMemoRun:
    """Plan and run batches until ``max_batches`` or the budget, then the census; check the history.

    On the embedded reference the campaign runs in segments of ``segment_batches`` batches (0:
    one segment), each on a fresh reference under its own seed (``segment_seed``: the first is
    the campaign's, so a run shorter than a segment is the run it always was), closed by its own
    census and checked, so memory is one segment's however long the run. A violation ends the
    campaign with its segment, which replays and shrinks alone. Over a URL: one segment.
    ``progress`` gets a line about every two seconds (batches and operations so far);
    ``on_batch(seconds since start, operations so far)`` hears about every batch (a hunt's shard
    publishes its counts with it); ``hooks`` hear of every batch but the census (a fault campaign
    over a URL).
    """
    started = time.monotonic()
    per_segment = None if target is not None or segment_batches <= 0 else segment_batches
    earlier, segment = (0, 0), 0
    reporter = _Reporter(started, progress, on_batch)
    while True:
        left = None if max_batches is None else max_batches - (earlier[0] - segment)  # censuses aside
        limit = per_segment if left is None else left if per_segment is None else min(left, per_segment)
        run = _segment(segment_seed(seed, segment), started, budget_s, limit, factory, target, reporter, earlier,
                       hooks)
        run = replace(run, segment=segment, earlier=earlier)
        over = time.monotonic() - started >= budget_s * 0.8 or (left is not None and limit == left)
        if run.findings or per_segment is None or over:
            return replace(run, elapsed_s=time.monotonic() - started)
        earlier, segment = (run.batches, run.operations), segment + 1


class _Reporter:
    """The campaign's counts, across its segments, for ``progress`` and ``on_batch``."""

    def __init__(self, started: float, progress: Callable[[str], None] | None,
                 on_batch: Callable[[float, int], None] | None) -> None:
        self.started, self.last = started, started
        self.progress, self.on_batch = progress, on_batch

    def batch(self, batches: int, operations: int) -> None:
        now = time.monotonic()
        if self.on_batch is not None:
            self.on_batch(now - self.started, operations)
        if self.progress is not None and now - self.last > 2.0:
            self.last = now
            self.progress(f"  {now - self.started:5.1f} s: {batches} batches, {operations} operations")


def _segment(seed: int, started: float, budget_s: float, max_batches: int | None, factory: XMemoFactory,
             target: XMemoHttpTarget | None, reporter: _Reporter, earlier: tuple[int, int],
             hooks: BatchHooks | None = None) -> XMemoRun:
    """One segment: batches on a fresh reference (or the URL) under ``seed``, its census, its check."""
    run_id = "r" if target is None else f"s{seed}x{random.SystemRandom().randrange(16**8):08x}"
    tgt: Target = XMemoEmbeddedTarget(seed=seed, factory=factory) if target is None else target
    planner = XMemoPlanner(rng=random.Random(seed), run_id=run_id, workers=_workers())
    recorder = Recorder()
    batches: list[Batch] = []
    decisions: list[tuple[int, ...]] = []
    sent = earlier[1]  # a count, not len(history()), which sorts the whole history
    try:
        while (max_batches is None or len(batches) < max_batches) and time.monotonic() - started < budget_s * 0.8:
            batch = planner.next_batch()
            if hooks is not None:
                hooks.before(len(batches))
            decisions.append(tuple(execute_batch(tgt, batch, recorder, _batch_seed(seed, len(batches)))))
            batches.append(batch)
            sent += len(batch.ops)
            reporter.batch(earlier[0] + len(batches), sent)
            if hooks is not None and hooks.after(len(batches) - 1):
                break
        census = planner.census()
        decisions.append(tuple(execute_batch(tgt, census, recorder, _batch_seed(seed, len(batches)))))
        batches.append(census)
    finally:
        tgt.close()
    history = tuple(recorder.history())
    plan = Plan(actors=AGENTS, workers=_workers(), batches=tuple(batches), run_id=run_id)
    return XMemoRun(seed=seed, plan=plan, history=history, decisions=tuple(decisions),
                    findings=tuple(violations(history)), elapsed_s=time.monotonic() - started)


def rerun(plan: Plan, seed: int, factory: XMemoFactory = reference_factory,
          schedule: Sequence[Sequence[int]] = ()) -> XMemoRun:
    """Execute a recorded plan on a fresh embedded reference, following ``schedule`` where it applies."""
    started = time.monotonic()
    tgt = XMemoEmbeddedTarget(seed=seed, factory=factory)
    recorder = Recorder()
    decisions = []
    try:
        for index, batch in enumerate(plan.batches):
            script = schedule[index] if index < len(schedule) else ()
            decisions.append(tuple(execute_batch(tgt, batch, recorder, _batch_seed(seed, index), script)))
    finally:
        tgt.close()
    history = tuple(recorder.history())
    return XMemoRun(seed=seed, plan=plan, history=history, decisions=tuple(decisions),
                    findings=tuple(violations(history)), elapsed_s=time.monotonic() - started)


def _trim_census(batches: list[Batch]) -> list[Batch]:
    """The census (last batch) reads only keys some remaining capture still uses."""
    used = {op.input.get("key") for batch in batches[:-1] for op in batch.ops if op.input.get("op") == "capture"}
    census = batches[-1]
    return [*batches[:-1], Batch(clock_ms=None, ops=tuple(op for op in census.ops if op.input.get("key") in used))]


def shrink(run: XMemoRun, factory: XMemoFactory = reference_factory, budget_s: float = 30.0) -> XMemoRun:
    """Fewest batches, then operations, that still show a violation of the same kind under the same seed."""
    if run.finding is None:
        return run
    kind, deadline, best = run.finding.kind, time.monotonic() + budget_s, run

    def attempt(batches: list[Batch], schedule: list[tuple[int, ...]]) -> XMemoRun | None:
        batches = _trim_census(batches)
        plan = Plan(actors=best.plan.actors, workers=best.plan.workers, batches=tuple(batches), run_id=best.plan.run_id)
        if time.monotonic() > deadline or plan.operations == 0:
            return None
        trial = rerun(plan, run.seed, factory, schedule)
        return trial if any(f.kind == kind for f in trial.findings) else None

    b = 0
    while b < len(best.plan.batches) - 1:  # the census (last) stays
        batches, schedule = list(best.plan.batches), list(best.decisions)
        got = attempt(batches[:b] + batches[b + 1:], schedule[:b] + schedule[b + 1:])
        if got is not None:
            best = got
            continue
        i = 0
        while i < len(best.plan.batches[b].ops):
            batches = list(best.plan.batches)
            batches[b] = Batch(clock_ms=None, ops=batches[b].ops[:i] + batches[b].ops[i + 1:])
            got = attempt(batches, list(best.decisions))
            if got is not None:
                best = got
            else:
                i += 1
        b += 1
    return best


# -- failures: replay file, timeline, pytest --------------------------------------------------


def export_failure(run: XMemoRun, out: Path, *, factory: str | None = None) -> dict[str, Path]:
    """Write the replay file, an HTML timeline and a pytest file for ``run``'s violation."""
    from simulations.linearizability.timeline import write_timeline

    out.mkdir(parents=True, exist_ok=True)
    stem = f"xmemo-race-seed-{run.seed}"
    finding = run.finding
    doc = {
        "format": FORMAT, "seed": run.seed, "target": {"kind": "embedded", "factory": factory},
        "plan": run.plan.to_json(), "schedule": [list(d) for d in run.decisions],
        "history": [op.to_json() for op in run.history],
        "finding": None if finding is None else {"kind": finding.kind, "requirement": finding.requirement,
                                                 "witness": list(finding.witness), "explanation": finding.explanation},
    }
    replay = out / f"{stem}.json"
    write_atomic(replay, json.dumps(doc, indent=1) + "\n")
    timeline = out / f"{stem}.html"
    write_timeline(timeline, run.history, title=f"XMemo race, seed {run.seed}",
                   highlight=finding.witness if finding else (), explanation=finding.explanation if finding else "",
                   actor_names={i: f"{agent}/{i % 2}" for i, agent in enumerate(run.plan.workers)},
                   describe=describe_operation)
    test = out / f"test_{stem.replace('-', '_')}.py"
    write_atomic(test, (
        f'"""XMemo race found by the simulator (seed {run.seed}); passes once the bug is fixed."""\n\n'
        "from pathlib import Path\n\n"
        "from simulations.xmemo.races import reproduce\n\n\n"
        f"def test_xmemo_race_seed_{run.seed}_does_not_reproduce() -> None:\n"
        f"    assert reproduce(Path(__file__).with_name({replay.name!r}), factory={factory!r}) == 0\n"))
    return {"replay file": replay, "timeline": timeline, "pytest file": test}


def reproduce(path: Path, times: int = 1, factory: str | None = None) -> int:
    """Run a replay file ``times`` times; how many runs showed a violation of the recorded kind.

    ``factory``: the XMemo reference factory (FILE.py:NAME) to run against. The file's own is
    never imported (a replay file is data, shared with bug reports): one it records must be named.

    Raises:
        SimulationError: when the file cannot be read, is not an XMemo replay file, or records a
            factory not named here.
    """
    try:
        doc = loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise SimulationError(f"cannot read replay file {path}: {str(exc).splitlines()[0][:200]}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SimulationError(f"{path} is not an XMemo replay file ({FORMAT})")
    try:
        recorded = recorded_target(doc.get("target")).get("factory")
        plan = Plan.from_json(doc.get("plan", {}))
    except SimulationError as exc:
        raise SimulationError(f"{path}: {exc}") from exc
    if recorded and not factory:
        raise unnamed_code(path, [("--ledger", recorded)])
    if not isinstance(doc.get("seed"), int) or not isinstance(doc.get("schedule") or [], list):
        raise SimulationError(f"{path}: 'seed' is not an integer or 'schedule' is not a list")
    kind = (doc.get("finding") or {}).get("kind") if isinstance(doc.get("finding") or {}, dict) else None
    run_with = load_factory(factory) if factory else reference_factory
    hits = 0
    for _ in range(times):
        trial = rerun(plan, doc["seed"], run_with, doc.get("schedule") or ())
        hits += any(kind is None or f.kind == kind for f in trial.findings)
    return hits
