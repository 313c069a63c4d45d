"""What a history shows beyond per-handoff linearizability: the receipts across handoffs.

The per-handoff model cannot see ``project_seq`` (it numbers every write of the project) nor
compare answers across partitions, so these rules are checked here, over the whole history:

* ``receipts``: one command id is always answered with the byte-identical receipt (handoff
  notes §5.1); no ``project_seq`` is given to two commands; ``project_seq`` follows real time
  (a command answered before another was sent has the smaller one);
* ``revision order``: per resource, revisions and ``project_seq`` rise together: a higher
  revision was committed at a higher ``project_seq``, even between concurrent commands, which
  real time does not order;
* ``change feed``: every receipt agrees with the change-feed entry at its ``project_seq``
  (resource, revision, actor, commit time), once the feed has been read that far (``feed``).

``ReceiptChecks`` is incremental: ``add`` takes the operations of a batch and ``feed`` the
feed entries read since; each returns what they break, at a cost that depends on what is new,
not on the history before it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from simulations.linearizability.history import Operation

__all__ = ["FeedEntry", "ReceiptChecks", "Violation", "receipt_violations"]


@dataclass(frozen=True, slots=True)
class Violation:
    operations: tuple[int, ...]  # indices into the history
    why: str
    kind: str = "receipts"  # which rule: receipts, revision order, change feed


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """A change-feed entry as the wire shows it (wire spec §5)."""

    seq: int
    kind: str
    resource_id: str
    revision: int
    actor_id: str
    committed_at_ms: int | None

    @staticmethod
    def from_json(raw: Mapping[str, object]) -> FeedEntry | None:
        resource = raw.get("resource")
        if not isinstance(resource, Mapping):
            return None
        seq, revision, at = raw.get("seq"), raw.get("revision"), raw.get("committed_at_ms")
        if not isinstance(seq, int) or not isinstance(revision, int):
            return None
        return FeedEntry(seq=seq, kind=str(resource.get("kind")), resource_id=str(resource.get("id")),
                         revision=revision, actor_id=str(raw.get("actor_id")),
                         committed_at_ms=at if isinstance(at, int) else None)


def _receipt(op: Operation) -> Mapping[str, object] | None:
    out = op.output
    if out is None or out.get("http") != 200:
        return None
    receipt = out.get("receipt")
    return receipt if isinstance(receipt, Mapping) else None


def _project_seq(op: Operation) -> object:
    receipt = _receipt(op)
    return None if receipt is None else receipt.get("project_seq")


@dataclass(slots=True)
class ReceiptChecks:
    """The receipt rules over a growing history (see the module docstring)."""

    history: list[Operation] = field(default_factory=list)  # empty unless ``keep``
    # ``keep=False`` (a campaign with its history on disk): only the operations still waiting
    # for their feed entry are kept, in ``_live``, so memory follows the receipts in flight.
    keep: bool = True
    _live: dict[int, Operation] = field(default_factory=dict)
    _count: int = 0
    # -> (digest of the receipt's text, first op): the digest, not the text, so that a long
    # campaign keeps 16 bytes per command rather than the whole receipt.
    _by_command: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    _by_seq: dict[object, str] = field(default_factory=dict)  # project_seq -> command id
    # command id -> the earliest call of an operation that sent it, answered or not: a command
    # whose first sending got no answer (indeterminate) may have committed from that moment.
    _first_call: dict[str, int] = field(default_factory=dict)
    # First answers by return time, with the running maximum of their project_seq, to ask "the
    # largest project_seq answered before time t" in O(log n).
    _returns: list[int] = field(default_factory=list)
    _own: list[tuple[int, int]] = field(default_factory=list)  # (seq, op), in return order
    _max_seq: list[tuple[int, int]] = field(default_factory=list)  # running maximum of _own
    # Per resource, (revision, project_seq, op) of its commits in revision order.
    _commits: dict[tuple[str, str], list[tuple[int, int, int]]] = field(default_factory=dict)
    _feed: dict[int, FeedEntry] = field(default_factory=dict)  # seq -> entry, as read so far
    _unmatched: dict[int, int] = field(default_factory=dict)  # receipt seq -> op, not yet in the feed

    def add(self, ops: Sequence[Operation]) -> list[Violation]:
        problems: list[Violation] = []
        firsts: list[int] = []
        for op in ops:
            index = self._count
            self._count += 1
            if self.keep:
                self.history.append(op)
            else:
                self._live[index] = op
            sent = op.input.get("command_id")
            if sent is not None and op.call_ns < self._first_call.get(str(sent), op.call_ns + 1):
                self._first_call[str(sent)] = op.call_ns
            receipt = _receipt(op)
            if receipt is None:
                continue
            command_id = str(op.input.get("command_id"))
            text = hashlib.blake2b(json.dumps(receipt, sort_keys=True).encode(), digest_size=16).digest()
            seen = self._by_command.get(command_id)
            if seen is not None:
                if seen[0] != text:
                    problems.append(Violation((seen[1], index),
                                              f"command {command_id} was answered with 2 different receipts"))
                continue
            self._by_command[command_id] = (text, index)
            firsts.append(index)
        for index in sorted(firsts, key=lambda i: self._op(i).call_ns):
            op = self._op(index)
            seq = _project_seq(op)
            command_id = str(op.input.get("command_id"))
            other = self._by_seq.get(seq)
            if other is not None and other != command_id:
                problems.append(Violation((self._by_command[other][1], index),
                                          f"project_seq {seq} was given to two commands"))
            self._by_seq.setdefault(seq, command_id)
            if isinstance(seq, int):
                before = self._answered_before(self._first_call.get(command_id, op.call_ns))
                if before is not None and before[0] >= seq:
                    problems.append(Violation((before[1], index),
                                              f"project_seq {seq} committed after {before[0]} had been answered"))
                problems.extend(self._rise_together(index, seq))
                problems.extend(self._against_feed(index, seq))
            # In call order, everything answered before a call is remembered before it is asked.
            self._remember(index)
        if not self.keep:
            self._live = {i: self._live[i] for i in self._unmatched.values()}
        return problems

    def _op(self, index: int) -> Operation:
        return self.history[index] if self.keep else self._live[index]

    def _rise_together(self, index: int, seq: int) -> list[Violation]:
        receipt = _receipt(self._op(index))
        assert receipt is not None
        resource = receipt.get("resource")
        revision = receipt.get("revision")
        if not isinstance(resource, Mapping) or not isinstance(revision, int):
            return []
        commits = self._commits.setdefault((str(resource.get("kind")), str(resource.get("id"))), [])
        k = bisect.bisect_left(commits, (revision, -1, -1))
        commits.insert(k, (revision, seq, index))
        out = []
        for other in (commits[k - 1] if k else None, commits[k + 1] if k + 1 < len(commits) else None):
            if other is None:
                continue
            (low_rev, low_seq, low), (high_rev, high_seq, high) = sorted([other, (revision, seq, index)])
            if low_rev < high_rev and low_seq >= high_seq:
                out.append(Violation((low, high), (
                    f"{resource.get('kind')} {resource.get('id')}: revision {high_rev} was committed at project_seq "
                    f"{high_seq}, before revision {low_rev} at project_seq {low_seq}"), kind="revision order"))
        return out

    def _against_feed(self, index: int, seq: int) -> list[Violation]:
        entry = self._feed.get(seq)
        if entry is None:
            self._unmatched[seq] = index
            return []
        return self._compare(index, entry)

    def _compare(self, index: int, entry: FeedEntry) -> list[Violation]:
        receipt = _receipt(self._op(index))
        assert receipt is not None
        resource = receipt.get("resource")
        said: tuple[object, ...] = (
            str(resource.get("kind")) if isinstance(resource, Mapping) else None,
            str(resource.get("id")) if isinstance(resource, Mapping) else None,
            receipt.get("revision"), str(receipt.get("actor_id")), receipt.get("committed_at_ms"))
        shown: tuple[object, ...] = (entry.kind, entry.resource_id, entry.revision, entry.actor_id,
                                     entry.committed_at_ms)
        if entry.committed_at_ms is None:  # a feed that leaves the time out is checked on the rest
            said, shown = said[:4], shown[:4]
        if said == shown:
            return []
        return [Violation((index,), (
            f"the receipt of command {self._op(index).input.get('command_id')} says project_seq {entry.seq} "
            f"is {said[0]} {said[1]} revision {said[2]} by {said[3]}; the change feed's entry {entry.seq} is "
            f"{entry.kind} {entry.resource_id} revision {entry.revision} by {entry.actor_id}"), kind="change feed")]

    def feed(self, entries: Sequence[FeedEntry]) -> list[Violation]:
        """Change-feed entries read since the last call (from every actor's view: each sees the
        handoffs it takes part in); receipts waiting for their entry are checked."""
        problems: list[Violation] = []
        for entry in entries:
            known = self._feed.setdefault(entry.seq, entry)
            if known != entry:
                problems.append(Violation((), f"the change feed shows two different entries at seq {entry.seq}: "
                                              f"{known} and {entry}", kind="change feed"))
                continue
            index = self._unmatched.pop(entry.seq, None)
            if index is not None:
                problems.extend(self._compare(index, entry))
        return problems

    def missing_from_feed(self) -> list[Violation]:
        """At the end of a run, with the feed read to its head: receipts with no entry at all."""
        return [Violation((index,), f"the receipt of command {self._op(index).input.get('command_id')} says "
                                    f"project_seq {seq}, and the change feed has no entry {seq}", kind="change feed")
                for seq, index in sorted(self._unmatched.items())]

    def _answered_before(self, at_ns: int) -> tuple[int, int] | None:
        k = bisect.bisect_left(self._returns, at_ns)  # returns strictly before at_ns
        return self._max_seq[k - 1] if k else None

    def _remember(self, index: int) -> None:
        op = self._op(index)
        seq = _project_seq(op)
        if op.return_ns is None or not isinstance(seq, int):
            return
        k = bisect.bisect_right(self._returns, op.return_ns)
        self._returns.insert(k, op.return_ns)
        self._own.insert(k, (seq, index))
        self._max_seq.insert(k, (seq, index))
        # Answers arrive in return order in a campaign, so this loop usually runs once.
        for j in range(k, len(self._own)):
            self._max_seq[j] = max(self._max_seq[j - 1], self._own[j]) if j else self._own[j]


def receipt_violations(history: Sequence[Operation]) -> list[tuple[list[int], str]]:
    """The receipt rules over a whole history at once."""
    return [(list(v.operations), v.why) for v in ReceiptChecks().add(history)]
