"""Injecting a schedule's faults into a campaign, and auditing what the server kept through them.

``FaultTarget`` is the campaign's target behind the ``FaultProxy``: it keeps every answered
write (actor, request, answer bytes) and the time of every request, for the audits and the
plots. ``Nemesis`` hears of each batch (``before``/``after``): at a batch with a fault it arms
the proxy (lost answers, resets, and a kill at a server's answer) or the target (a pause or a
clock jump once a write is sent); a thread of its own then restarts the killed server, resumes
the paused one or moves the test clock; after a batch with a
restart it resends a sample of the earlier answered writes, which must answer byte for byte as
they did, and measures the recovery (from the kill to the first answered write after it).
``final_audit`` resends every answered write, and reads the whole change feed: its sequence has
no gap, every answered write is at its receipt's sequence, and no handoff has two live claims.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from simulations.feed import FeedFollower
from simulations.faults.proxy import FaultProxy
from simulations.errors import SimulationError
from simulations.faults.schedule import Fault, FaultSchedule
from simulations.model import LEASE_MS
from simulations.targets import HttpTarget, Lost, Reply

__all__ = ["Call", "FaultFinding", "FaultTarget", "Nemesis", "Server", "Window", "operation_kind"]

RESEND_SAMPLE = 20  # earlier answered writes resent after each restart
FINAL_RESEND_LIMIT = 5_000  # the final audit resends all of them up to this many (the newest)
_RETRY_WAIT_S = 0.05


class Server(Protocol):
    """What the nemesis needs of a served server (``conformance.serve.ServedServer``)."""

    @property
    def url(self) -> str: ...
    @property
    def others(self) -> Sequence[Server]: ...  # the target file's other servers on the same data
    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def restart(self) -> object: ...


@dataclass(frozen=True, slots=True)
class Call:
    """One request the campaign sent: when, what kind, and how it ended (a status or "lost")."""

    start_s: float
    end_s: float
    kind: str
    outcome: str


@dataclass(frozen=True, slots=True)
class Window:
    """A fault's time span, in seconds since the campaign started."""

    kind: str
    start_s: float
    end_s: float
    batch: int


@dataclass(frozen=True, slots=True)
class FaultFinding:
    """A broken promise the audits found, with the requirements it breaks."""

    rule: str
    requirements: tuple[str, ...]
    explanation: str


@dataclass(frozen=True, slots=True)
class _Answered:
    actor: str
    path: str
    body: bytes
    answer: bytes
    sent_s: float


def operation_kind(method: str, path: str) -> str:
    """A request's kind for the plots: ``POST accept``, ``GET handoffs``, ``POST commands``."""
    words = path.split("?", 1)[0].strip("/").split("/")
    if len(words) >= 4 and words[:2] == ["v1", "projects"]:
        rest = words[3:]  # handoffs/ID/accept, handoffs/ID, changes, resources/KIND/ID
        name = rest[0] if len(rest) <= 2 or rest[0] == "resources" else rest[-1]
        return f"{method} {name}"
    return f"{method} {words[-1]}"


class FaultTarget(HttpTarget):
    """An ``HttpTarget`` that keeps what the audits and the plots need of every request."""

    def __init__(self, url: str, project: str, tokens: Mapping[str, str], *, timeout_s: float, started: float) -> None:
        super().__init__(url, project, tokens, timeout_s=timeout_s)
        self.started = started
        self.answered: list[_Answered] = []
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        # Called before the clock is read or moved: execute_batch reads it again as a batch
        # ends, and a killed server must be back (the fault over) before the reading counts.
        self.quiet: Callable[[], None] = lambda: None
        # (writes still to send before it, the fault's start): a kill or pause waits for a write
        self._trigger: tuple[int, Callable[[], None]] | None = None

    def arm(self, after_posts: int, fire: Callable[[], None]) -> None:
        with self._lock:
            self._trigger = (after_posts, fire)

    def disarm(self) -> Callable[[], None] | None:
        """The trigger, if it never fired."""
        with self._lock:
            trigger, self._trigger = self._trigger, None
        return None if trigger is None else trigger[1]

    def _count_write(self) -> None:
        with self._lock:  # held while it fires: a disarm that finds it gone returns once it has
            if self._trigger is None:
                return
            left, fire = self._trigger
            self._trigger = None if left == 0 else (left - 1, fire)
            if left == 0:
                fire()

    def now_ms(self) -> int | None:
        self.quiet()
        return super().now_ms()

    def set_clock(self, now_ms: int) -> int | None:
        self.quiet()
        return super().set_clock(now_ms)

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        begin = time.monotonic() - self.started
        if method == "POST" and path.startswith("/v1/"):
            self._count_write()
        outcome = "lost"
        try:
            reply = super().request(actor, method, path, body)
            outcome = str(reply.status)
            return reply
        finally:
            end = time.monotonic() - self.started
            with self._lock:
                if not path.startswith("/__test__/"):  # the test clock is the campaign's, not an operation
                    self.calls.append(Call(begin, end, operation_kind(method, path), outcome))
                if outcome == "200" and method == "POST" and path.startswith("/v1/") and body is not None:
                    self.answered.append(_Answered(actor, path, body, reply.body, begin))

    def first_answer_after(self, at_s: float) -> float | None:
        """When the first write sent after ``at_s`` and answered was sent (None: none was)."""
        with self._lock:
            return next((a.sent_s for a in self.answered if a.sent_s > at_s), None)


@dataclass(slots=True)
class Nemesis:
    """Injects ``schedule``'s faults into a campaign on ``target`` and audits what survived."""

    schedule: FaultSchedule
    target: FaultTarget
    proxy: FaultProxy
    servers: Sequence[Server] = ()  # the served servers, in [[serve]] order (none: no kill or pause)
    kills: int = 0
    pauses: int = 0
    jumps: int = 0
    windows: list[Window] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)  # seconds from a kill to the first write sent and answered
    findings: list[FaultFinding] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _fault: Fault | None = None
    _killed_at: list[float] = field(default_factory=list)
    _errors: list[BaseException] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return self.proxy.dropped

    @property
    def resets(self) -> int:
        return self.proxy.resets

    def summary(self) -> str:
        return (f"{self.kills} kills, {self.pauses} pauses, {self.dropped} answers dropped, {self.resets} resets, "
                f"{self.jumps} clock jumps")

    def _now(self) -> float:
        return time.monotonic() - self.target.started

    def __post_init__(self) -> None:
        self.target.quiet = self._join

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def wait(self) -> None:
        """Until the fault under way (a kill's restart, a pause) is over; safe from any thread:
        the clients' workers wait here before rerunning a call that ended in doubt."""
        thread = self._thread
        if thread is None:
            return
        while thread.ident is None:  # assigned by _start and not started yet: an instant
            time.sleep(0.001)
        thread.join()

    def before(self, batch: int) -> None:
        """Arm batch ``batch``'s fault, if it has one."""
        fault = self.schedule.at(batch)
        self._fault = fault
        if fault is None:
            return
        if fault.kind in ("drop-answers", "reset"):
            self.proxy.arm(fault.kind, fault.count, before=fault.before)
            self.windows.append(Window(fault.kind, self._now(), self._now(), batch))
            return
        if fault.kind == "kill":
            self.proxy.arm_answer(fault.server, fault.after_posts, lambda: self._kill(fault))
            return
        self.target.arm(fault.after_posts, lambda: self._start(fault))

    def _start(self, fault: Fault) -> None:
        self._thread = threading.Thread(target=self._inject, args=(fault, None), daemon=True,
                                        name="aidememo-sim-nemesis")
        self._thread.start()

    def _kill(self, fault: Fault) -> None:
        """Kill the server now (on the proxy's thread, the answer it holds not yet passed on); the
        restart is the nemesis thread's."""
        start = self._now()
        # Assigned before the kill: a client's worker whose request the kill cut waits for it
        # (``wait``) until the server is back.
        thread = self._thread = threading.Thread(target=self._inject, args=(fault, start), daemon=True,
                                                 name="aidememo-sim-nemesis")
        try:
            # Marked down first: the proxy sends the killed server nothing until its test clock is
            # back where the others' is (a restart starts it again from the wall clock), so no
            # answer is ever given at a time before one already given.
            self.proxy.down(fault.server)
            self.servers[fault.server].kill()  # kill is refused without [serve]
            self.kills += 1
            self._killed_at.append(start)
        except BaseException as exc:  # surfaced in after(), in the campaign's thread
            self._errors.append(exc)
        thread.start()

    def _inject(self, fault: Fault, start: float | None) -> None:
        try:
            if start is None:
                time.sleep(fault.delay_ms / 1000)
                start = self._now()
            if fault.kind == "clock-jump":
                self._jump(LEASE_MS + fault.jump_ms)
            elif fault.kind == "kill":
                self._restart(fault)
            else:
                server = self.servers[fault.server]  # kill and pause are refused without [serve]
                server.pause()
                self.pauses += 1
                try:
                    time.sleep(fault.length_ms / 1000)
                finally:
                    server.resume()
            self.windows.append(Window(fault.kind, start, self._now(), fault.batch))
        except BaseException as exc:  # surfaced in after(), in the campaign's thread
            self._errors.append(exc)

    def _restart(self, fault: Fault) -> None:
        server = self.servers[fault.server]
        time.sleep(fault.length_ms / 1000)
        server.restart()
        self.proxy.restore_clock(fault.server, self.target.tokens[self.target.actors[0]])
        self.proxy.up(fault.server)

    def _jump(self, advance_ms: int) -> None:
        """Move the test clock (every server's, through the proxy) by ``advance_ms``.

        Raises:
            SimulationError: the clock did not move (the target claimed a test clock it lacks).
        """
        body = json.dumps({"advance_ms": advance_ms}).encode()
        try:
            reply = HttpTarget.request(self.target, self.target.actors[0], "POST", "/__test__/clock", body)
        except Lost as exc:
            raise SimulationError(f"the test clock did not move: {exc}") from None
        if reply.status != 200:
            raise SimulationError(f"the test clock did not move: POST /__test__/clock answered {reply.status} "
                                  f"{_short(reply.body)}")
        self.jumps += 1

    def after(self, batch: int) -> bool:
        """The batch ended: finish its fault; after a restart, audit a sample. True: stop the run.

        Raises:
            BaseException: what the fault's thread raised (a server that did not come back).
        """
        for unfired in (self.target.disarm(), self.proxy.disarm_answer()):
            if unfired is not None:
                unfired()  # the batch had fewer writes: the fault falls at its end, and still counts
        self._join()
        self.proxy.disarm()
        if self._errors:
            raise self._errors[0]
        fault, self._fault = self._fault, None
        if fault is None:
            return bool(self.findings)
        if fault.kind in ("drop-answers", "reset") and self.windows and self.windows[-1].batch == batch:
            last = self.windows[-1]
            self.windows[-1] = Window(last.kind, last.start_s, self._now(), batch)
        if fault.kind == "kill":
            rng = random.Random(f"resend:{self.schedule.seed}:{batch}")
            earlier = list(self.target.answered)
            self._resend(rng.sample(earlier, min(RESEND_SAMPLE, len(earlier))), f"after the restart in batch {batch}")
        return bool(self.findings)

    def measure_recoveries(self) -> None:
        """Recovery of each kill: to the sending of the first write after it that was answered
        (none: not counted)."""
        for killed in self._killed_at:
            first = self.target.first_answer_after(killed)
            if first is not None:
                self.recoveries.append(first - killed)

    def _resend(self, answered: Sequence[_Answered], when: str) -> None:
        for entry in answered:
            again = self._send(entry.actor, "POST", entry.path, entry.body)
            if again is None:
                self._note("receipts survive restarts", ("AM-CMD-2", "AM-CONF-04"),
                           f"{when}: resending {_command_id(entry.body)} got no answer, twice")
            elif again.body != entry.answer:
                self._note("receipts survive restarts", ("AM-CMD-2", "AM-CONF-04"),
                           f"{when}: {_command_id(entry.body)} was answered {_short(entry.answer)}; resent with the "
                           f"identical body it answered {again.status} {_short(again.body)}")

    def _send(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply | None:
        # The audits' own requests go straight to the server's URL through the same wire: not
        # through the proxy (disarmed anyway) and not into the campaign's call log.
        for _ in range(2):
            try:
                return HttpTarget.request(self.target, actor, method, path, body)
            except Lost:
                time.sleep(_RETRY_WAIT_S)
        return None

    def _note(self, rule: str, requirements: tuple[str, ...], text: str) -> None:
        if not any(f.rule == rule for f in self.findings):  # the first of each rule says enough
            self.findings.append(FaultFinding(rule, requirements, text))

    def final_audit(self) -> None:
        """Every answered write resent; the whole feed read: no gap, every receipt at its seq,
        at most one live claim per handoff."""
        answered = list(self.target.answered)[-FINAL_RESEND_LIMIT:]
        self._resend(answered, "at the end")
        feed = self._whole_feed()
        if feed is None:
            self._note("change feed", ("AM-FEED-3",), "the change feed could not be read at the end")
            return
        seqs = sorted(feed)
        if seqs and seqs != list(range(seqs[0], seqs[-1] + 1)):
            gap = next(s for a, s in zip(seqs, seqs[1:]) if s != a + 1)
            self._note("project_seq contiguous", ("AM-CONF-09", "AM-SNAP-1"),
                       f"the change feed's sequence has a gap before {gap} ({len(seqs)} entries up to {seqs[-1]})")
        for entry in answered:
            receipt = _json(entry.answer)
            resource = receipt.get("resource") if isinstance(receipt, dict) else None
            if not isinstance(receipt, dict) or not isinstance(resource, dict):
                continue
            seq = receipt.get("project_seq")
            said = (str(resource.get("kind")), str(resource.get("id")), receipt.get("revision"))
            there = feed.get(seq) if isinstance(seq, int) else None
            if there != said:
                self._note("answered writes in the feed", ("AM-RACE-1", "AM-CONF-09"),
                           f"{_command_id(entry.body)} was answered with project_seq {seq} ({said[0]} {said[1]} "
                           f"revision {said[2]}); the change feed has {there or 'nothing'} there")
        self._claims(answered)

    def _claims(self, answered: Sequence[_Answered]) -> None:
        # Per handoff, the claims of its answered accepts in revision order; a second claim is
        # live at once unless the handoff was returned, failed or its lease expired in between,
        # which the ledger model judges; here: two claims answered at one revision.
        at: dict[tuple[str, object], set[str]] = {}
        for entry in answered:
            if not entry.path.endswith("/accept"):
                continue
            receipt, body = _json(entry.answer), _json(entry.body)
            if not isinstance(receipt, dict) or not isinstance(body, dict):
                continue
            payload = body.get("payload")
            claim = payload.get("claim_id") if isinstance(payload, dict) else None
            at.setdefault((entry.path, body.get("expected_revision")), set()).add(str(claim))
        for (path, revision), claims in at.items():
            if len(claims) > 1:
                self._note("one live claim", ("AM-HO-3",),
                           f"{path.split('/')[-2]}: accepts from revision {revision} were answered for "
                           f"{len(claims)} claims ({', '.join(sorted(claims))})")

    def _whole_feed(self) -> dict[int, tuple[str, str, object]] | None:
        try:
            follower = FeedFollower(self.target)
        except Exception:  # noqa: BLE001 - a server that cannot answer is one finding, not a crash
            return None
        follower.cursor = dict.fromkeys(follower.cursor, 0)
        return {e.seq: (e.kind, e.resource_id, e.revision) for e in follower.poll()}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _command_id(body: bytes) -> str:
    doc = _json(body)
    return f"command {doc.get('command_id')}" if isinstance(doc, dict) else "a command"


def _short(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return text if len(text) <= 300 else text[:300] + "..."
