"""Aims: short plans that bring a fresh handoff to a state, act on it in one way, then read every mailbox and feed.

Random steps rarely chain the five or six right moves a deep state needs (a failed return needs
an accepted claim and a result fact by the receiver in the handoff's session; a completed
handoff in an inbox read without ``include_completed`` needs all that and the read). An aim
names a state and an action (``failed / accept: new claim`` is a re-claim of a failed handoff;
``send / context by another member`` is a send whose context someone else wrote for it), and
its plan is the steps that get there, written as thunks the generator calls when their turn
comes, so each step is built from what the reference answered so far; a step whose handoff the
reference never created is dropped. The generator draws aims least tried first (``coverage``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from conformance.profiles.aidememo.diff.model import Model
from conformance.profiles.aidememo.diff.steps import NO_TOKEN, Step

__all__ = ["Generator", "aims", "least_tried", "plan"]


class Generator(Protocol):
    """What a plan builds its steps with (``generator.Generator``): each call draws one step and
    sets what its answer will change in the model."""

    model: Model
    mcp: bool  # the target answers MCP

    def fresh(self, prefix: str) -> str: ...
    def session_as(self, actor: str, sid: str, source: str | None, note: str = "") -> Step: ...
    def fact_as(self, actor: str, session: str, fid: str, content: str | None = None, note: str = "") -> Step: ...
    def context_as(self, author: str, cid: str, handoff: str, session: str, to: str, content: str | None = None,
                   note: str = "") -> Step: ...
    def send_as(self, actor: str, hid: str, session: str, to: str, context: str | None, *, focus: bool = True,
                note: str = "") -> Step: ...
    def accept_as(self, hid: str, actor: str, claim: str, expected: int, note: str = "") -> Step: ...
    def heartbeat_as(self, hid: str, actor: str, claim: str, expected: int, note: str = "") -> Step: ...
    def return_as(self, hid: str, actor: str, claim: str, fact: str, outcome: str, expected: int,
                  note: str = "") -> Step: ...
    def advance(self, ms: int) -> Step: ...
    def status_read(self, actor: str, hid: str) -> Step: ...
    def mailbox_read(self, actor: str, query: str) -> Step: ...
    def feed_read(self, actor: str, materialized: bool, query: str = "project_epoch=$epoch&after_seq=0") -> Step: ...
    def resource_read(self, actor: str, kind: str, rid: str) -> Step: ...
    def search_read(self, actor: str) -> Step: ...
    def search_as(self, actor: str, query: str) -> Step: ...
    def mcp_call(self, actor: str, name: str | None, arguments: dict[str, Any] | None = None) -> Step: ...
    def retry(self) -> Step | None: ...

Thunk = Callable[[], Step | None]

STATES = ("pending", "accepted", "failed", "completed")
ACTIONS = (
    "accept: new claim", "accept: own claim", "accept: not the receiver", "accept: stale revision",
    "accept, then return succeeded", "heartbeat: own claim", "heartbeat: new claim", "heartbeat: not the receiver",
    "heartbeat: no token", "return: no token", "return: not the receiver",
    "return: succeeded", "return: failed", "return: the same evidence", "return: the other outcome",
    "return: fact of another session", "return: fact of another source", "return: fact by another actor",
    "return: new claim", "reads",
)
# Pages past a read's default size (upstream's: mailbox 20, search 20, feed 100) and at its edges.
# Each opens an episode (``Generator._aim``), as its writes fill most of one.
PAGES = ("mailbox past its default page", "search past its default page", "feed past half its default page")
PAGED_WRITES = {"mailbox past its default page": 22, "search past its default page": 22,
                # An episode holds 60 steps, too few for more than upstream's 100 changes: 51 tell a
                # default of 50 from one of 100, and the reads at the limits tell the rest.
                "feed past half its default page": 50}
SEARCH_WORD = "milestone"  # in every fact of the search aim, so that one search finds them all
SENDS = ("context by its sender", "context by another member", "context by the receiver",
         "context to another receiver", "context for another handoff", "context in another session")


def aims(clock: bool) -> list[str]:
    """Every aim; ``aged`` (accepted, 70 s of the 120 s lease gone: live, unless a server's lease is
    shorter) and ``expired`` (130 s gone) only where both test clocks move. No aim moves a clock
    near the lease's edge: real time passes between two steps, differently on each side."""
    states = (*STATES, "aged", "expired") if clock else STATES
    # A completed handoff keeps its lease's expiry in its record: its evidence again after the lease time.
    lapsed = ["lapsed / return: the same evidence"] if clock else []
    return ([f"{where} / {action}" for where in states for action in ACTIONS] + [f"send / {what}" for what in SENDS]
            + lapsed + [f"pages / {what}" for what in PAGES])


def least_tried(rng: random.Random, tried: dict[str, int], choices: list[str]) -> str:
    low = min(tried.get(aim, 0) for aim in choices)
    return rng.choice([aim for aim in choices if tried.get(aim, 0) == low])


def plan(g: Generator, aim: str) -> list[Thunk]:
    """The steps toward ``aim``, on a fresh session and handoff of the episode's sender and receiver."""
    where, _, action = aim.partition(" / ")
    hid, session = g.fresh("h"), g.fresh("s")
    note = f"aim: {aim}"
    steps: list[Thunk] = [lambda: g.session_as("sender", session, "src", note=_noted("sessions", note))]
    if where == "pages":
        return steps + _pages(g, action, session, note)
    if where == "send":
        return steps + _context_send(g, action, hid, session, note) + _reads(g, hid)
    steps.append(lambda: g.send_as("sender", hid, session, "receiver", None, note=_noted("handoffs", note)))
    steps += _to_state(g, where, hid, session, note)
    acts = _act(g, action, hid, session, note)
    # A transition is sent once more as it was (a client retrying a lost answer) before the reads.
    return steps + acts + ([g.retry] if acts else []) + _reads(g, hid)


def _on(g: Generator, hid: str, build: Callable[[], Step]) -> Thunk:
    """``build`` once its turn comes, if the reference created the handoff (else the step is dropped)."""
    return lambda: build() if hid in g.model.handoffs else None


def _noted(route: str, note: str) -> str:
    """A plan step's note: its route's name, then the aim (``_route_name`` reads the name back)."""
    return f"{route} ({note})"


def _accept(g: Generator, hid: str, note: str) -> Thunk:
    def build() -> Step:
        record = g.model.handoffs[hid]
        return g.accept_as(hid, record.to, g.fresh("claim"), record.revision, note=_noted("accept", note))
    return _on(g, hid, build)


def _return(g: Generator, hid: str, fact: str, outcome: str, note: str) -> Thunk:
    def build() -> Step:
        record = g.model.handoffs[hid]
        return g.return_as(hid, record.to, record.claim or g.fresh("claim"), fact, outcome, record.revision,
                           note=_noted("return", note))
    return _on(g, hid, build)


def _result_fact(g: Generator, hid: str, session: str, fact: str, note: str, author: str = "receiver") -> Thunk:
    return _on(g, hid, lambda: g.fact_as(author, session, fact, note=_noted("facts", f"result fact, {note}")))


def _to_state(g: Generator, where: str, hid: str, session: str, note: str) -> list[Thunk]:
    """The moves from pending to ``where`` (``lapsed``: completed, then 130 s), then a read of the status they left."""
    steps = [] if where == "pending" else [_accept(g, hid, note)]
    if where in ("failed", "completed", "lapsed"):
        fact = g.fresh("f")
        outcome = "failed" if where == "failed" else "succeeded"
        steps += [_result_fact(g, hid, session, fact, note), _return(g, hid, fact, outcome, note)]
    if where in ("aged", "expired", "lapsed"):
        steps.append(_on(g, hid, lambda: g.advance(70_000 if where == "aged" else 130_000)))
    return [*steps, _glance(g, hid)]


def _act(g: Generator, action: str, hid: str, session: str, note: str) -> list[Thunk]:
    verb = action.split(":")[0].split(",")[0]
    if verb == "accept":
        return _accept_action(g, action, hid, session, note)
    if verb == "heartbeat":
        def heartbeat() -> Step:
            record = g.model.handoffs[hid]
            actor = "sender" if action.endswith("not the receiver") else NO_TOKEN if action.endswith("no token") \
                else record.to
            claim = g.fresh("claim") if action.endswith("new claim") or record.claim is None else record.claim
            return g.heartbeat_as(hid, actor, claim, record.revision, note=_noted("heartbeat", note))
        return [_on(g, hid, heartbeat)]
    if verb == "return":
        return _return_action(g, action, hid, session, note)
    return []


def _accept_action(g: Generator, action: str, hid: str, session: str, note: str) -> list[Thunk]:
    def accept() -> Step:
        record = g.model.handoffs[hid]
        actor = "outsider" if action.endswith("not the receiver") else record.to
        claim = record.claim if action.endswith("own claim") and record.claim else g.fresh("claim")
        stale = action.endswith("stale revision")
        expected = record.revision - 1 if stale and record.revision > 1 else record.revision + 1 if stale \
            else record.revision
        return g.accept_as(hid, actor, claim, expected, note=_noted("accept", note))
    steps = [_on(g, hid, accept)]
    if action.startswith("accept, then return"):
        fact = g.fresh("f")
        steps += [_result_fact(g, hid, session, fact, note), _return(g, hid, fact, "succeeded", note)]
    return steps


def _return_action(g: Generator, action: str, hid: str, session: str, note: str) -> list[Thunk]:
    fact, steps = g.fresh("f"), []
    what = action.partition(": ")[2]
    if what in ("fact of another session", "fact of another source"):
        other = g.fresh("s")
        source = "src-b" if what.endswith("source") else "src"
        steps += [_on(g, hid, lambda: g.session_as("sender", other, source, note=_noted("sessions", note))),
                  _result_fact(g, hid, other, fact, note)]
    elif what == "fact by another actor":
        steps.append(_result_fact(g, hid, session, fact, note, author="sender"))
    elif what not in ("the same evidence", "the other outcome"):
        steps.append(_result_fact(g, hid, session, fact, note))

    def build() -> Step:
        record = g.model.handoffs[hid]
        claim = g.fresh("claim") if what == "new claim" or record.claim is None else record.claim
        evidence, outcome = record.evidence or (fact, "succeeded"), "failed" if what == "failed" else "succeeded"
        if what == "the same evidence":
            evidence, outcome = evidence, evidence[1]
        elif what == "the other outcome":
            outcome = "succeeded" if evidence[1] == "failed" else "failed"
        actor = NO_TOKEN if what == "no token" else "outsider" if what == "not the receiver" else record.to
        return g.return_as(hid, actor, claim, evidence[0] if what in ("the same evidence", "the other outcome")
                           else fact, outcome, record.revision, note=_noted("return", note))
    return steps + [_on(g, hid, build)]


def _context_send(g: Generator, what: str, hid: str, session: str, note: str) -> list[Thunk]:
    """A context written for the handoff about to be sent (or not quite), then that send naming it."""
    cid, author, to, written_for, in_session = g.fresh("c"), "sender", "receiver", hid, session
    steps: list[Thunk] = []
    if what == "context by another member":
        author = "outsider"
    elif what == "context by the receiver":
        author, to = "receiver", "sender"
    elif what == "context to another receiver":
        to = "outsider"
    elif what == "context for another handoff":
        written_for = g.fresh("h")
    elif what == "context in another session":
        in_session = g.fresh("s")
        steps.append(lambda: g.session_as("sender", in_session, "src", note=_noted("sessions", note)))
    steps += [lambda: g.context_as(author, cid, written_for, in_session, to, note=_noted("handoff-contexts", note)),
              g.retry, lambda: g.send_as("sender", hid, session, "receiver", cid, note=_noted("handoffs", note)),
              g.retry]
    return steps + [lambda: g.resource_read("receiver", "handoff_context", cid),
                    lambda: g.resource_read("outsider", "handoff_context", cid)]


def _glance(g: Generator, hid: str) -> Thunk:
    """One read between two moves: the handoff's status, as its receiver sees it."""
    return _on(g, hid, lambda: g.status_read("receiver", hid))


def _reads(g: Generator, hid: str) -> list[Thunk]:
    """Every mailbox (with its default and the other include_completed) as the handoff's ends see
    them, both feeds, the status as its receiver sees it, and a search for the latest fact's words;
    with MCP, the mailboxes through the gateway too, and the tools a reader is offered."""
    gateway: list[Thunk] = [lambda: g.mcp_call("receiver", "handoff_list", {"box": "inbox"}),
                            lambda: g.mcp_call("sender", "handoff_list", {"box": "outbox"}),
                            lambda: g.mcp_call("reader", None)] if g.mcp else []
    return gateway + [
        lambda: g.status_read("receiver", hid), lambda: g.mailbox_read("receiver", "box=inbox"),
        lambda: g.mailbox_read("receiver", "box=inbox&include_completed=true"),
        lambda: g.mailbox_read("sender", "box=outbox"),
        lambda: g.mailbox_read("sender", "box=outbox&include_completed=false"),
        lambda: g.feed_read("sender", False), lambda: g.feed_read("receiver", True), lambda: g.search_read("receiver"),
    ]


def _pages(g: Generator, what: str, session: str, note: str) -> list[Thunk]:
    """Enough writes for a read past its default page, then reads with no limit, at the maximum
    limit and one past it, and a page that ends exactly at the last entry."""
    count = PAGED_WRITES[what]
    if what.startswith("mailbox"):
        sends = [_send(g, g.fresh("h"), session, note) for _ in range(count)]
        return sends + [lambda: g.mailbox_read("receiver", "box=inbox"),
                        lambda: g.mailbox_read("receiver", "box=inbox&limit=100"),
                        lambda: g.mailbox_read("receiver", "box=inbox&limit=101"),
                        lambda: g.mailbox_read("receiver", f"box=inbox&include_completed=true&limit={_inbox(g)}"),
                        lambda: g.mailbox_read("sender", f"box=outbox&limit={_outbox(g)}")]
    words = SEARCH_WORD if what.startswith("search") else "plan the release"
    facts = [_fact(g, g.fresh("f"), session, f"{words} notes, part {n}", note) for n in range(count)]
    if what.startswith("search"):
        return facts + [lambda: g.search_as("receiver", f"q={SEARCH_WORD}"),
                        lambda: g.search_as("receiver", f"q={SEARCH_WORD}&limit=100"),
                        lambda: g.search_as("receiver", f"q={SEARCH_WORD}&limit=101"),
                        lambda: g.search_as("receiver", "q=" + "m" * 4096),
                        lambda: g.search_as("receiver", "q=" + "m" * 4097)]
    feed = "project_epoch=$epoch&after_seq="
    return facts + [lambda: g.feed_read("sender", False), lambda: g.feed_read("receiver", True),
                    lambda: g.feed_read("sender", False, f"{feed}0&limit=10000"),
                    lambda: g.feed_read("sender", False, f"{feed}0&limit=10001"),
                    lambda: g.feed_read("receiver", True, f"{feed}{max(0, g.model.max_seq - 2)}&limit=2")]


def _send(g: Generator, hid: str, session: str, note: str) -> Thunk:
    return lambda: g.send_as("sender", hid, session, "receiver", None, focus=False, note=_noted("handoffs", note))


def _fact(g: Generator, fid: str, session: str, content: str, note: str) -> Thunk:
    return lambda: g.fact_as("sender", session, fid, content, note=_noted("facts", note))


def _inbox(g: Generator) -> int:
    """How many handoffs the receiver's inbox holds, completed ones too: a page of exactly that size ends at its last."""
    return max(1, sum(record.to == "receiver" for record in g.model.handoffs.values()))


def _outbox(g: Generator) -> int:
    return max(1, sum(record.sender == "sender" for record in g.model.handoffs.values()))
