"""What a history shows beyond per-handoff linearizability: the receipts across handoffs.

The per-handoff model cannot see ``project_seq`` (it numbers every write of the project) nor
compare answers across partitions, so these rules are checked here, over the whole history:

* one command id is always answered with the byte-identical receipt (handoff notes §5.1);
* no ``project_seq`` is given to two commands;
* ``project_seq`` follows real time: a command answered before another was sent has the
  smaller ``project_seq``.

``ReceiptChecks`` is incremental: ``add`` takes the operations of a batch and returns what they
break, at a cost that depends on the batch, not on the history before it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from simulations.history import Operation

__all__ = ["ReceiptChecks", "Violation", "receipt_violations"]


@dataclass(frozen=True, slots=True)
class Violation:
    operations: tuple[int, ...]  # indices into the history
    why: str


def _receipt(op: Operation) -> Mapping[str, object] | None:
    out = op.output
    if out is None or out.get("http") != 200:
        return None
    receipt = out.get("receipt")
    return receipt if isinstance(receipt, Mapping) else None


@dataclass(slots=True)
class ReceiptChecks:
    """The receipt rules over a growing history (see the module docstring)."""

    history: list[Operation] = field(default_factory=list)
    _by_command: dict[str, tuple[str, int]] = field(default_factory=dict)  # -> (receipt text, first op)
    _by_seq: dict[object, str] = field(default_factory=dict)  # project_seq -> command id
    # First answers by return time, with the running maximum of their project_seq, to ask "the
    # largest project_seq answered before time t" in O(log n).
    _returns: list[int] = field(default_factory=list)
    _own: list[tuple[int, int]] = field(default_factory=list)  # (seq, op), in return order
    _max_seq: list[tuple[int, int]] = field(default_factory=list)  # running maximum of _own

    def add(self, ops: Sequence[Operation]) -> list[Violation]:
        problems: list[Violation] = []
        firsts: list[int] = []
        for op in ops:
            index = len(self.history)
            self.history.append(op)
            receipt = _receipt(op)
            if receipt is None:
                continue
            command_id = str(op.input.get("command_id"))
            text = json.dumps(receipt, sort_keys=True)
            seen = self._by_command.get(command_id)
            if seen is not None:
                if seen[0] != text:
                    problems.append(Violation((seen[1], index),
                                              f"command {command_id} was answered with 2 different receipts"))
                continue
            self._by_command[command_id] = (text, index)
            firsts.append(index)
        for index in sorted(firsts, key=lambda i: self.history[i].call_ns):
            op = self.history[index]
            seq = _receipt(op).get("project_seq")  # type: ignore[union-attr]
            command_id = str(op.input.get("command_id"))
            other = self._by_seq.get(seq)
            if other is not None and other != command_id:
                problems.append(Violation((self._by_command[other][1], index),
                                          f"project_seq {seq} was given to two commands"))
            self._by_seq.setdefault(seq, command_id)
            if isinstance(seq, int):
                before = self._answered_before(op.call_ns)
                if before is not None and before[0] >= seq:
                    problems.append(Violation((before[1], index),
                                              f"project_seq {seq} committed after {before[0]} had been answered"))
            # In call order, everything answered before a call is remembered before it is asked.
            self._remember(index)
        return problems

    def _answered_before(self, at_ns: int) -> tuple[int, int] | None:
        k = bisect.bisect_left(self._returns, at_ns)  # returns strictly before at_ns
        return self._max_seq[k - 1] if k else None

    def _remember(self, index: int) -> None:
        op = self.history[index]
        seq = _receipt(op).get("project_seq")  # type: ignore[union-attr]
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
