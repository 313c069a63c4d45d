"""Following a target's change feed during a run, so receipts can be set against it.

Each actor sees the changes of the resources it may see (a handoff: its two participants), so
the feed is read as every writer and the views are merged; each read goes on from that actor's
last cursor, so a poll costs what is new. These reads, like the planner's, are not part of the
history: they check it.
"""

from __future__ import annotations

from urllib.parse import urlencode

from simulations.errors import SimulationError
from simulations.receipts import FeedEntry
from simulations.targets import Lost, Target

__all__ = ["FeedFollower"]

_PAGE = 10_000  # the wire's largest feed page (AM-FEED-1)


class FeedFollower:
    """The change feed of the target's project, from the moment this follower was made."""

    def __init__(self, target: Target) -> None:
        self.target = target
        try:
            reply = target.request(target.actors[0], "GET", f"/v1/projects/{target.project}/snapshot")
        except Lost as exc:  # the server went away between setup and the first read
            raise SimulationError(f"setup failed: the snapshot got no answer ({exc})") from None
        doc = reply.json()
        if reply.status != 200 or not isinstance(doc, dict):
            raise SimulationError(f"setup failed: the snapshot answered {reply.status} {reply.body[:120]!r}")
        try:
            self.epoch, head = str(doc["project_epoch"]), int(doc["at_seq"])
        except (KeyError, TypeError, ValueError):
            raise SimulationError("setup failed: the snapshot has no project_epoch and at_seq") from None
        self.cursor = dict.fromkeys(target.actors, head)

    def poll(self) -> list[FeedEntry]:
        """Entries committed since the last poll, as every writer sees them; a lost answer is
        read again at the next poll."""
        entries: list[FeedEntry] = []
        for actor, after in self.cursor.items():
            while True:
                query = urlencode({"project_epoch": self.epoch, "after_seq": after, "limit": _PAGE})
                try:
                    reply = self.target.request(actor, "GET", f"/v1/projects/{self.target.project}/changes?{query}")
                except Lost:
                    break
                doc = reply.json()
                if reply.status != 200 or not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
                    break  # the checks of the answers say what is wrong with this server
                entries.extend(e for e in (FeedEntry.from_json(raw) for raw in doc["entries"]
                                           if isinstance(raw, dict)) if e is not None)
                cursor = doc.get("next_cursor")
                nxt = cursor.get("after_seq") if isinstance(cursor, dict) else None
                if not isinstance(nxt, int) or nxt <= after:
                    break
                after = nxt
                if not doc.get("has_more"):
                    break
            self.cursor[actor] = after
        return entries
