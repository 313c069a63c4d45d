"""``ActorVisibility``: every actor, the reader included, sees exactly what the model lets it see.

Writes by all actors (sessions, facts, contexts, sends to any member, accepts and returns that
move handoffs between mailboxes); after every step one invariant per read path compares the
target with the model (``read_status``, ``read_resource``, ``read_mailbox``, ``read_snapshot``,
``read_changes``). Each step reads only a few paths, so every step costs about the same and
the machine runs at CI speed: each resource the step wrote is read by one actor, in turn one
the model lets see it and one it does not (each side's actors in turn); one listing in turn after
each step that committed a write (a mailbox, the snapshot, a change feed from the last cursor),
each actor in turn at it, each mailbox and feed in turn. ``teardown`` reads
every listing for every actor, and every resource on each path by both sides at its current
revision, so nothing is left unread at the end. Over a test run the turns put every actor on
every side many times; the ``deep`` profile reads more.
"""

from __future__ import annotations

import sys

from collections.abc import Callable
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from simulations.machines.base import CreatingMachine, LedgerMachine
from simulations.machines.wire import ACTORS, WRITERS
from simulations.model import (
    Op,
    Status,
    may_read,
    read_changes,
    read_mailbox,
    read_resource,
    read_snapshot,
    status_of,
)
from simulations.plan import READER

__all__ = ["ActorVisibility"]

T = TypeVar("T")
LISTINGS = ("mailbox", "snapshot", "feed")  # one of them is read per step, in turn


class ActorVisibility(CreatingMachine):
    """Writes that change who may see what, and one invariant per read path."""

    # Its reads are the visibility invariants'; auditing untouched records is the other
    # machines' part (they all audit), and teardown still reads every record.
    audits = False

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0  # whose listings this step reads, and which of each side's actors read
        self.everyone = False  # teardown: every actor reads every path
        self.verified: dict[tuple[str, str, str, str], int] = {}  # (path, actor, kind, id) -> revision read right
        self._looked_at = -1  # the write generation the visibility invariants last looked at
        self.written: set[tuple[str, str]] = set()  # what the writes since then touched
        self.feed_seen: dict[tuple[str, bool], int] = {}  # (actor, materialized) -> entries checked
        self.feed_cursor: dict[tuple[str, bool], int] = {}  # (actor, materialized) -> after_seq
        # The listings' own turn: it moves only after a step that committed something, since a
        # listing read after a step that changed nothing would read what the last one read.
        self.listing_turn = 0
        self._listings_of: object = None  # the model state the listings last looked at
        self._listings_now = False  # whether this step's listings read
        self._listings_at = -1  # the write generation that decided it

    @rule(sender=st.sampled_from(WRITERS), receiver=st.sampled_from((*WRITERS, READER)),
          session=LedgerMachine.sessions, with_context=st.booleans())
    def send(self, sender: str, receiver: str, session: str, with_context: bool) -> None:
        self.send_handoff(sender, receiver, session, with_context)

    @precondition(lambda self: bool(self.with_status(Status.PENDING)))
    @rule(data=st.data())
    def accept(self, data: st.DataObject) -> None:
        handoff = data.draw(st.sampled_from(self.with_status(Status.PENDING)), label="handoff")
        self.write(Op.ACCEPT, self.receiver(handoff), handoff, {"claim_id": self.claim(handoff, "new")},
                   self.revision(handoff))

    @precondition(lambda self: bool(self.with_status(Status.ACCEPTED)))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        """The receiver returns its own result: the handoff leaves the receiver's inbox."""
        self.write_and_return_result(data.draw(st.sampled_from(self.with_status(Status.ACCEPTED)), label="handoff"),
                               "succeeded")

    # -- one invariant per read path ------------------------------------------------------------------

    def _since_last_look(self) -> set[tuple[str, str]]:
        """The resources written since the invariants last looked (the same for all of them
        within a step); the turn moves on with every new look."""
        if self._looked_at != self._generation:
            self._looked_at = self._generation
            self.written, self.touched_resources = self.touched_resources, set()
            self.turn += 1
        return self.written

    def _listed(self, listing: str) -> list[str]:
        """The actor whose ``listing`` this step reads: one listing per step that committed a
        write (a refused write changes no listing, and the model is unchanged: the next step
        that changes the ledger reads on, and teardown reads every listing), each listing in
        turn, and each actor in turn at it; in teardown (which steps through the actors) every
        listing."""
        self._since_last_look()
        if self.everyone:
            return [ACTORS[self.turn % len(ACTORS)]]
        if self._listings_at != self._generation:
            self._listings_at = self._generation
            self._listings_now = self._listings_of is not self.model
            if self._listings_now:
                self._listings_of = self.model
                self.listing_turn += 1
        if not self._listings_now or LISTINGS[self.listing_turn % len(LISTINGS)] != listing:
            return []
        return [ACTORS[self.listing_turn // len(LISTINGS) % len(ACTORS)]]

    def _in_turn(self, *choices: T) -> tuple[T, ...]:
        """Which of a listing's variants (mailboxes, feeds) this step reads: each in turn,
        after every actor had its turn at the previous one; all of them in teardown."""
        if self.everyone:
            return choices
        return (choices[self.listing_turn // (len(LISTINGS) * len(ACTORS)) % len(choices)],)

    def _readers(self, path: str, kind: str, rid: str, may_see: Callable[[str], bool]) -> list[str]:
        """Who reads a resource on ``path``: the model splits the actors into the side that may
        see it and the side that may not, and the answer depends only on the side. After a step,
        one actor: each side in turn, each side's actors in turn. In teardown, one actor of each
        side that no one of it has read at the current revision."""
        seeing = [a for a in ACTORS if may_see(a)]
        sides = [side for side in (seeing, [a for a in ACTORS if a not in seeing]) if side]
        if self.everyone:
            now = self._revision(kind, rid)
            return [side[self.turn % len(side)] for side in sides
                    if all(self.verified.get((path, a, kind, rid)) != now for a in side)]
        side = sides[self.turn % len(sides)]
        return [side[self.turn // len(sides) % len(side)]]

    def record_reader(self, handoff_id: str) -> str:
        """The participant whose status read the invariant above makes this step, when it reads
        one (its read then serves the record invariants too), else the receiver."""
        h = self.modelled(handoff_id)
        assert h is not None
        if (self.everyone or ("handoff", handoff_id) not in self._since_last_look()):
            return h.to_actor
        return next((a for a in self._readers("status", "handoff", handoff_id, h.visible_to) if h.visible_to(a)),
                    h.to_actor)

    def _read_right(self, path: str, actor: str, kind: str, rid: str) -> None:
        self.verified[(path, actor, kind, rid)] = self._revision(kind, rid)

    def _revision(self, kind: str, rid: str) -> int:
        res = self.model.resources.get((kind, rid))
        return 0 if res is None else res.revision  # 0: absent (a refused create)

    @invariant()
    def status_reads_follow_participation(self) -> None:
        """AM-HL-WHO-2, AM-VIS-1: typed status answers participants only (403 otherwise, 404 absent)."""
        for handoff_id in sorted(r for k, r in self._since_last_look() if k == "handoff"):
            h = self.modelled(handoff_id)
            # The sides status_of answers 200 and 403/404 (it answers 200 to a participant only).
            for actor in self._readers("status", "handoff", handoff_id, lambda a: h is not None and h.visible_to(a)):
                want = status_of(h, actor)
                status, code, doc = self.read_status(actor, handoff_id)
                assert (status, code) == (want.http, want.code), f"{actor} status of {handoff_id}: {status} {code}"
                if status == 200:
                    assert isinstance(want.body, dict)
                    assert doc["revision"] == want.body["revision"], f"{actor} status of {handoff_id}: revision"
                    self.lease_times_match(doc["record"], want.body["record"], f"{actor} sees {handoff_id}")
                self._read_right("status", actor, "handoff", handoff_id)

    @invariant()
    def resource_reads_hide_what_is_not_theirs(self) -> None:
        """AM-VIS-1, AM-VIS-3: generic reads answer 404 for a hidden handoff or context, and show
        sessions and facts to every member."""
        for kind, rid in sorted(self._since_last_look()):
            for actor in self._readers("resource", kind, rid,
                                       lambda a: may_read(self.model, a, kind, rid)):
                want = read_resource(self.model, actor, kind, rid)
                status, code, doc = self.wire.request(actor, "GET", f"{self.base()}/resources/{kind}/{rid}")
                assert (status, code) == (want.http, want.code), f"{actor} reading {kind}/{rid}: {status} {code}"
                if status == 200:
                    assert isinstance(want.body, dict)
                    assert doc["revision"] == want.body["revision"], f"{actor} reading {kind}/{rid}: revision"
                    self.lease_times_match(doc["state"]["body"], want.body["body"], f"{actor} reads {kind}/{rid}")
                self._read_right("resource", actor, kind, rid)

    @invariant()
    def mailboxes_list_exactly_their_handoffs(self) -> None:
        """AM-MBOX-1, AM-MBOX-3: inbox and outbox hold the actor's handoffs, newest mutation first."""
        for actor in self._listed("mailbox"):
            for box in self._in_turn("inbox", "outbox"):
                status, _, doc = self.wire.request(actor, "GET", f"{self.base()}/handoffs",
                                                   params={"box": box, "limit": 100})
                assert status == 200, f"{actor} {box}: {status}"
                got = [(e["project_seq"], e["revision"], e["record"]["handoff_id"]) for e in doc["assignments"]
                       if f"-{self.wire.prefix}-" in e["record"]["handoff_id"]]
                want = [(self.seq_map.get(seq), rev, hid) for seq, rev, hid in read_mailbox(self.model, actor, box)]
                assert got == want[: len(got)] and len(got) == min(len(want), 100), f"{actor} {box}: {got} != {want}"

    @invariant()
    def snapshots_show_exactly_what_each_actor_may_see(self) -> None:
        """AM-VIS-1, AM-SNAP-1: the snapshot lists every visible resource at its revision, no other."""
        for actor in self._listed("snapshot"):
            status, _, doc = self.wire.request(actor, "GET", f"{self.base()}/snapshot")
            assert status == 200, f"{actor} snapshot: {status}"
            got = [(r["resource"]["kind"], r["resource"]["id"], r["revision"]) for r in doc["resources"]
                   if f"-{self.wire.prefix}-" in r["resource"]["id"]]
            assert got == read_snapshot(self.model, actor), f"{actor} snapshot"

    @invariant()
    def feeds_show_exactly_what_each_actor_may_see(self) -> None:
        """AM-VIS-1, AM-FEED-2: both change feeds hold exactly the visible changes, in order.

        Who may see a resource never changes once it exists (participants are fixed at the
        send), so after a step each feed is read on from the actor's last cursor; ``teardown``
        reads every actor's feeds again from the start.
        """
        for actor in self._listed("feed"):
            for materialized in self._in_turn(False, True):
                key = (actor, materialized)
                after = self.feed_cursor.get(key, self.start_seq)
                path = f"{self.base()}/changes/materialized" if materialized else f"{self.base()}/changes"
                status, _, doc = self.wire.request(actor, "GET", path, params={
                    "project_epoch": self.epoch, "after_seq": after, "limit": 10_000})
                assert status == 200, f"{actor} feed: {status}"
                entries = [e["change"] if materialized else e for e in doc["entries"]]
                got = [(e["seq"], e["resource"]["kind"], e["resource"]["id"], e["revision"]) for e in entries
                       if f"-{self.wire.prefix}-" in e["resource"]["id"]]
                want = [(self.seq_map.get(seq), k, rid, rev)
                        for seq, k, rid, rev in read_changes(self.model, actor, materialized=materialized)]
                done = self.feed_seen.get(key, 0)
                name = f"{actor} {'materialized ' if materialized else ''}feed"
                assert got == want[done:], f"{name} after seq {after}: {got} != {want[done:]}"
                self.feed_seen[key] = len(want)
                self.feed_cursor[key] = int(doc["next_cursor"]["after_seq"])

    def teardown(self) -> None:
        try:
            if sys.exc_info()[1] is not None:
                return  # a step already failed: that failure is the report, not a second one
            self.touched_resources = set(self.model.resources)
            self._generation += 1
            self.everyone = True
            self.forget_reads()
            # Every feed read again from the start: an entry rewritten after it was checked is caught.
            self.feed_seen, self.feed_cursor = {}, {}
            self.status_reads_follow_participation()
            self.resource_reads_hide_what_is_not_theirs()
            for _ in ACTORS:
                self.feeds_show_exactly_what_each_actor_may_see()
                self.mailboxes_list_exactly_their_handoffs()
                self.snapshots_show_exactly_what_each_actor_may_see()
                self._generation += 1  # the next actor's turn
        finally:
            super().teardown()
