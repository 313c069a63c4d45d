"""Bounded recall: rank every visible memory, then pack a context no larger than both bounds.

Theory of operation. Recall never drops a memory for sharing no word with the query (the
seed's last query shares none with the decision it must return): every memory the caller may
see is scored, and the score only orders them. The score is the memory's BM25 relevance to the
query, normalised to [0, 1] within the candidates, plus a recency term linear in
``updated_at`` (newest 0.25, oldest 0)
and, when ``prefer_working`` is set, 0.5 for working memories (so working state outranks
recency, but not a strong lexical match), all divided by their maximum so that a score (and
search's ``similarity``) lies in [0, 1]. Ties fall to the newer memory,
then to the smaller id, so the order is a function of the store's contents.

Packing walks that order and keeps an item when its entry still fits; the first item is
truncated to fit rather than dropped, later ones that do not fit are skipped (a shorter one
further down may still fit). Both bounds hold by construction and are asserted at the end:

* never more than ``max_items`` items;
* ``estimate_tokens(context_text) <= max_tokens``, where the estimate is one token per four
  UTF-8 bytes of ``context_text``, rounded up. It covers the whole combined text (entry
  headers and separators included), which is the only readable text in the packet; item
  metadata (ids, scores, boundary objects) is not counted.

Pure: memories, caller and clock value in; a packet out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Protocol

from refkit.search import bm25, tokenize
from ._records import Boundary, Memory, MemoryType, Relation

__all__ = [
    "BYTES_PER_TOKEN",
    "TOKEN_ESTIMATE",
    "Ranked",
    "Candidates",
    "PackedItem",
    "Packet",
    "estimate_tokens",
    "rank",
    "pack",
    "render_entry",
    "TRUNCATION_MARK",
]

BYTES_PER_TOKEN: Final = 4
TOKEN_ESTIMATE: Final = "ceil(utf8_bytes(context_text) / 4)"
TRUNCATION_MARK: Final = " …"
RECENCY_WEIGHT: Final = 0.25
WORKING_WEIGHT: Final = 0.5
ENTRY_SEPARATOR: Final = "\n\n"
MAX_SCORE: Final = 1.0 + RECENCY_WEIGHT + WORKING_WEIGHT  # scores are divided by it, so they lie in [0, 1]


def estimate_tokens(text: str) -> int:
    """The documented token estimate: one token per four UTF-8 bytes, rounded up."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranked:
    memory: Memory
    score: float


class Candidates(Sized, Protocol):
    """What ``pack`` walks: ranked memories in order, and how many there are (a list, or ``_ranking``'s lazy one)."""

    def __iter__(self) -> Iterator[Ranked]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PackedItem:
    memory: Memory
    score: float
    rank: int  # 1-based position in the packet
    boundary: Boundary
    truncated: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Packet:
    items: tuple[PackedItem, ...]
    context_text: str
    used_tokens: int
    candidates: int  # every visible memory that was ranked
    omitted_by_items: int
    omitted_by_tokens: int


@lru_cache(maxsize=65_536)
def _terms(content: str, path: str) -> Counter[str]:
    # Memoised because every recall scores every visible memory; callers never mutate the Counter.
    return Counter(tokenize(f"{content} {path}"))


def rank(memories: Iterable[Memory], query: str, prefer_working: bool) -> list[Ranked]:
    """Score and order every candidate (see the module docstring for the formula)."""
    rows = list(memories)
    if not rows:
        return []
    terms = set(tokenize(query))
    docs = [_terms(m.content, m.path) for m in rows]
    lengths = [sum(doc.values()) for doc in docs]
    avg_len = sum(lengths) / len(rows)
    df = {term: sum(1 for doc in docs if term in doc) for term in terms}
    lexical = [
        sum(bm25(tf=doc[t], df=df[t], n_docs=len(rows), doc_len=length, avg_len=avg_len) for t in terms if doc[t])
        for doc, length in zip(docs, lengths)
    ]
    top = max(lexical)
    oldest = min(m.updated_at_ms for m in rows)
    span = max(m.updated_at_ms for m in rows) - oldest
    recency = [(m.updated_at_ms - oldest) / span if span else 1.0 for m in rows]
    ranked = []
    for i, memory in enumerate(rows):
        score = (lexical[i] / top if top > 0 else 0.0) + RECENCY_WEIGHT * recency[i]
        if prefer_working and memory.memory_type is MemoryType.WORKING:
            score += WORKING_WEIGHT
        ranked.append(Ranked(memory=memory, score=round(score / MAX_SCORE, 6)))
    ranked.sort(key=lambda r: (-r.score, -r.memory.updated_at_ms, r.memory.id))
    return ranked


def render_entry(position: int, memory: Memory, boundary: Boundary, content: str) -> str:
    """One item's text in ``context_text``: a header line naming id, type and writer, then the content."""
    agent = memory.agent_id or "-"
    return (
        f"[{position}] id={memory.id} memory_type={memory.memory_type.value} "
        f"agent_id={agent} relation={boundary.relation.value}\n{content}"
    )


def _fit(position: int, memory: Memory, boundary: Boundary, budget: int) -> str | None:
    """The longest truncation of the entry within ``budget`` bytes, or None if not even the header fits."""
    content = memory.content
    if len(render_entry(position, memory, boundary, TRUNCATION_MARK).encode("utf-8")) > budget:
        return None
    lo, hi = 0, len(content)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        text = render_entry(position, memory, boundary, content[:mid] + TRUNCATION_MARK)
        if len(text.encode("utf-8")) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return render_entry(position, memory, boundary, content[:lo] + TRUNCATION_MARK)


# The fixed part of an entry's header, and the shortest values its fields can take (an agent is
# at least "-", content may be empty): no entry is shorter than this plus its position and id.
_HEADER_BYTES: Final = (len("[] id= memory_type= agent_id= relation=\n") + min(len(t.value) for t in MemoryType)
                        + 1 + min(len(r.value) for r in Relation))


def _least_entry(position: int, shortest_id: int, separated: bool) -> int:
    """No candidate's entry at ``position`` (whole, or truncated to its header) takes fewer bytes."""
    return _HEADER_BYTES + len(str(position)) + shortest_id + (len(ENTRY_SEPARATOR) if separated else 0)


def _walk(ranked: Candidates, full: Callable[[], bool]) -> Iterator[Ranked]:
    """``ranked`` in order, until ``full()`` says nothing more can be packed (asked after each
    candidate, before the next is read, so a lazy ranking reads no further)."""
    for candidate in ranked:
        yield candidate
        if full():
            return


def pack(
    ranked: Candidates,
    *,
    max_items: int,
    max_tokens: int,
    boundary_of: Callable[[Memory], Boundary],
) -> Packet:
    """Keep ranked items in order while both bounds hold.

    Candidates that name the length of their shortest id (``shortest_id``, as the store's index
    does) let the walk stop once the budget left is below any entry: every candidate after that
    would be skipped as over the token bound, so they are counted as such unread. Without it a
    small ``max_tokens`` walked (and ranked) every visible memory.
    """
    budget = max_tokens * BYTES_PER_TOKEN  # estimate_tokens(t) <= max_tokens  <=>  bytes(t) <= budget
    shortest: int | None = getattr(ranked, "shortest_id", None)
    entries: list[str] = []
    items: list[PackedItem] = []
    used = 0
    by_tokens = 0
    walked = 0
    for candidate in _walk(ranked, lambda: shortest is not None and len(items) < max_items and
                           budget - used < _least_entry(len(items) + 1, shortest, bool(entries))):
        walked += 1
        if len(items) == max_items:
            break
        position = len(items) + 1
        bound = boundary_of(candidate.memory)
        entry = render_entry(position, candidate.memory, bound, candidate.memory.content)
        cost = len(entry.encode("utf-8")) + (len(ENTRY_SEPARATOR) if entries else 0)
        truncated = False
        if used + cost > budget:
            if entries:
                by_tokens += 1
                continue
            fitted = _fit(position, candidate.memory, bound, budget)
            if fitted is None:
                by_tokens += 1
                continue
            entry, truncated, cost = fitted, True, len(fitted.encode("utf-8"))
        entries.append(entry)
        used += cost
        items.append(PackedItem(memory=candidate.memory, score=candidate.score, rank=position,
                                boundary=bound, truncated=truncated))
    else:
        by_tokens += len(ranked) - walked  # the walk stopped early: none of the rest could fit
    context_text = ENTRY_SEPARATOR.join(entries)
    tokens = estimate_tokens(context_text)
    assert len(items) <= max_items and tokens <= max_tokens, "a packet must hold both bounds"
    considered = len(items) + by_tokens
    return Packet(items=tuple(items), context_text=context_text, used_tokens=tokens, candidates=len(ranked),
                  omitted_by_items=len(ranked) - considered, omitted_by_tokens=by_tokens)
