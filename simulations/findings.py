"""A hunt's findings told apart: what was violated, and the shape of the shrunk case.

Two shards that found one bug should report it once, and two bugs should stay two. A finding's
key is what it violated (the ledger model or a receipt rule; the XMemo requirement; for the
remote client, its broken promise) and the shape of the shrunk case. Where the ledger model says
which answers it required of an operation, the shape is those: each such operation and the
answers the model allowed it (an accept that had to be refused ``409 stale_revision``), since
what came out instead depends on the interleaving (a 200 in one shard; in another a 403 from a
later check the stale revision got past). Otherwise it is the operations the checker blamed:
each one's operation, the part its actor plays in the handoff (sender, receiver, reader, another
actor) and the class of its answer (status and error code, or unknown). Ids, projects, seeds,
revisions and timestamps are left out, and so are order and repetition, which over a URL the
network decides. The coordinator keeps the first shard's case of each key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from simulations.clients import ClientRun
from simulations.faults.shard import FaultFound
from simulations.linearizability.history import Operation
from simulations.plan import READER
from simulations.shards import Found
from simulations.xmemo.campaign import XMemoRun

__all__ = ["Distinct", "Key", "finding_key", "shape", "violated"]

Key = tuple[str, tuple[str, ...]]
# What a client's promise text names that differs from run to run: the handoff, the operation it
# broke the promise on (one retry bug shows on accepts in one shard, on returns in another), a
# claim, numbers.
_INCIDENTAL = re.compile(r"^\S+: |\bhandoff\.[a-z]+ |\bclaim[-_][\w-]+(\.\.\.)?|\b[0-9a-f]{8,}\b(\.\.\.)?|\d+")
_NUMBER = re.compile(r"\d+")


@dataclass(slots=True)
class Distinct:
    """One distinct finding: the first shard's case, and every shard that found it."""

    result: Found
    shards: list[int]
    paths: dict[str, Path] = field(default_factory=dict)
    reproduction: tuple[int, int] | None = None  # over a URL: how often its shrunk case failed
    replay_words: list[str] = field(default_factory=list)  # the factory or target file replay must name


def violated(found: Found) -> str:
    """The AideMemo rule (or the ledger model) a finding broke, the XMemo requirement, or, for
    the remote client, ``client`` (its own promise) unless the server's history broke a rule."""
    if isinstance(found, XMemoRun):
        return "" if found.finding is None else found.finding.requirement
    if isinstance(found, FaultFound):
        return found.findings[0].rule if found.findings else ""
    if isinstance(found, ClientRun) and found.finding is None:
        return "client"
    return "" if found.finding is None else found.finding.kind


def finding_key(found: Found) -> Key:
    """What a shrunk failure violated, and its shape: equal for one bug whichever shard found it."""
    return violated(found), shape(found)


def shape(found: Found) -> tuple[str, ...]:
    """The blamed operations as ``op role answer`` words, sorted and without repeats; for the
    remote client's promise, its problems with their ids, operations and numbers left out."""
    if isinstance(found, ClientRun) and found.finding is None:
        return tuple(sorted({_INCIDENTAL.sub("", problem).strip() for problem in found.client_findings}))
    if isinstance(found, FaultFound):  # the rules its audits found broken (which request a fault met is chance)
        return tuple(sorted({f.rule for f in found.findings}))
    finding = found.finding
    if finding is None:
        return ()
    history = found.history
    expected = getattr(finding, "expected", ())
    if expected:
        # The ledger model names the answers it required: the rule broken, however the wrong
        # answer came out (a 200, or a 403 from a later check the stale revision let through).
        return tuple(sorted({f"{history[i].input.get('op')} expects {'|'.join(sorted(map(_answer, answers)))}"
                             for i, answers in expected if i < len(history)}))
    roles = _roles(history)
    return tuple(sorted({_word(history[i], roles) for i in finding.witness if i < len(history)}))


def _answer(text: str) -> str:
    """A model's answer, its status kept and its numbers (revisions, counts) left out."""
    status, _, rest = text.partition(" ")
    return f"{status} {_NUMBER.sub('N', rest)}".strip()


def _roles(history: Sequence[Operation]) -> dict[tuple[str, str], str]:
    """(handoff id, actor) -> the actor's part in that handoff, from the handoff's send."""
    roles: dict[tuple[str, str], str] = {}
    for op in history:
        if op.input.get("op") != "handoff.send":
            continue
        handoff = str(op.input.get("handoff_id"))
        payload = op.input.get("payload")
        receiver = payload.get("to_actor") if isinstance(payload, Mapping) else None
        roles[(handoff, str(op.input.get("actor")))] = "sender"
        roles[(handoff, str(receiver))] = "receiver"
    return roles


def _word(op: Operation, roles: Mapping[tuple[str, str], str]) -> str:
    actor = str(op.input.get("actor", op.input.get("agent", "")))
    role = "reader" if actor == READER else roles.get((str(op.input.get("handoff_id")), actor), "actor")
    output = op.output
    if output is None:
        answer = "unknown"
    else:
        status, code = output.get("http", output.get("status")), output.get("code")
        answer = f"{status}" if code is None else f"{status}:{code}"
        answer += f":{output['write']}" if "write" in output else ""  # XMemo: created, unchanged, ...
    route = f"/{op.input['route']}" if "route" in op.input else ""  # XMemo: remember, timeline_event, ...
    return f"{op.input.get('op')}{route} {role} {answer}"
