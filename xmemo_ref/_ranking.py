"""``_recall.rank`` of a partition, exactly, reading only as much of it as the packet needs.

Theory of operation. ``rank`` scores every visible memory: its BM25 relevance to the query over
the largest one (``top``), plus a recency term, plus the working bonus, rounded; then sorts by
(-score, -updated, id). ``Ranking`` yields the same memories with the same scores in the same
order, lazily, by Fagin's threshold algorithm over sorted lists of the partition (``_index``):

* the corpus statistics BM25 needs (documents, average length, documents per query term, the
  oldest and newest update) are the partition's running totals less the expired documents';
* each query term's documents in descending order of that term's contribution (its
  (tf, length) groups, sorted by the very float each group's members contribute);
* the documents newest first, the working ones in a list of their own when the bonus applies.

Reading one document from each list in turn, every document not read yet scores at most the
same formula applied to the lists' current heads: the term heads' sum for its relevance, the
recency head's update time for its recency. Every operation in the formula is a correctly
rounded float operation, monotone in each input, and the bound adds the same floats in the
same order (the query's term set iterated as ``rank`` iterates it), so the bound is never below
any unread document's score, rounding included. First the largest relevance (``top``) is found
this way; then a read document is released once its sort key is below every list's bound key
(the bound score, then the list head's update time and id, which no unread document of that
list precedes). So the order is ``rank``'s, including every tie; ``tests/xmemo/test_ranking.py``
compares the two on generated partitions. A query whose words most documents share still reads
only a little more than it releases; filters other than the scope are not kept in lists, and
such a recall falls back to ``rank`` over the memories they let through.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TypeAlias

from sortedcontainers import SortedList

from refkit.search import bm25, tokenize
from ._index import Doc, Partition
from ._recall import MAX_SCORE, RECENCY_WEIGHT, WORKING_WEIGHT, Ranked
from ._records import MemoryType

__all__ = ["View", "Ranking"]

_Key: TypeAlias = tuple[float, int, str]  # (-score, -updated_at_ms, id): rank's sort key


class View:
    """A partition at one instant: its documents less those expired at ``now_ms``."""

    def __init__(self, partition: Partition, now_ms: int) -> None:
        self.partition = partition
        excluded: set[str] = set()
        for expires_at_ms, memory_id in partition.expiring:
            if expires_at_ms > now_ms:
                break
            excluded.add(memory_id)
        self.excluded = excluded
        docs = partition.docs
        self.count = len(docs) - len(excluded)
        self.total = partition.total - sum(docs[m].length for m in excluded)
        newest = next((k for k in partition.recency if k[1] not in excluded), None)
        oldest = next((k for k in reversed(partition.recency) if k[1] not in excluded), None)
        self.newest = 0 if newest is None else -newest[0]
        self.oldest = 0 if oldest is None else -oldest[0]

    def df(self, term: str) -> int:
        docs = self.partition.docs
        return self.partition.df.get(term, 0) - sum(1 for m in self.excluded if term in docs[m].terms)


class Ranking:
    """``rank`` of a view's memories: ``len`` is how many there are, iteration yields them in order."""

    def __init__(self, view: View, query: str, prefer_working: bool) -> None:
        self._view, self._query, self._prefer = view, query, prefer_working
        self.shortest_id = view.partition.shortest_id  # what ``_recall.pack`` may stop on

    def __len__(self) -> int:
        return self._view.count

    def __iter__(self) -> Iterator[Ranked]:
        if self._view.count == 0:
            return iter(())
        return _Stream(self._view, self._query, self._prefer).run()


class _Term:
    """One query term's documents in descending order of the term's contribution."""

    __slots__ = ("_groups", "_next", "_ids", "value")

    def __init__(self, groups: list[tuple[float, set[str]]]) -> None:
        self._groups = groups
        self._next = 1
        self.value: float | None = groups[0][0]  # no unread document gets more; None once all are read
        self._ids = iter(groups[0][1])

    def take(self) -> str | None:
        while True:
            for memory_id in self._ids:
                return memory_id
            if self._next == len(self._groups):
                self.value = None
                return None
            self.value, ids = self._groups[self._next]
            self._ids = iter(ids)
            self._next += 1


class _Recent:
    """Documents newest first, ties to the smaller id, less those ``skip`` names."""

    __slots__ = ("_keys", "_skip", "head", "working")

    def __init__(self, keys: SortedList[tuple[int, str]], skip: Callable[[str], bool], working: bool) -> None:
        self._keys = iter(keys)
        self._skip = skip
        self.working = working  # its documents get the working bonus
        self.head: tuple[int, str] | None = None  # (-updated_at_ms, id) of the next document
        self._advance()

    def _advance(self) -> None:
        self.head = next((key for key in self._keys if not self._skip(key[1])), None)

    def take(self) -> str | None:
        head = self.head
        if head is None:
            return None
        self._advance()
        return head[1]


class _Stream:
    """One run of the threshold algorithm (see the module docstring)."""

    def __init__(self, view: View, query: str, prefer_working: bool) -> None:
        self._view, self._prefer = view, prefer_working
        self._docs = view.partition.docs
        self._n = view.count
        self._avg = view.total / view.count
        self._terms = set(tokenize(query))  # built as rank builds it, so iterated in the same order
        self._df = {term: view.df(term) for term in self._terms}
        self._lists: dict[str, _Term] = {}
        for term in self._terms:
            if self._df[term] > 0:
                groups = [(bm25(tf=tf, df=self._df[term], n_docs=self._n, doc_len=length, avg_len=self._avg), ids)
                          for (tf, length), ids in view.partition.postings[term].items()]
                groups.sort(key=lambda group: group[0], reverse=True)
                self._lists[term] = _Term(groups)
        self._seen: dict[str, float] = {}  # id -> its relevance, for every document read
        self._top: float = 0
        self._span = view.newest - view.oldest

    def _lexical(self, doc: Doc) -> float:
        counts, df, n, length, avg = doc.terms, self._df, self._n, doc.length, self._avg
        return sum(bm25(tf=counts[t], df=df[t], n_docs=n, doc_len=length, avg_len=avg)
                   for t in self._terms if counts[t])

    def _tau(self) -> float:
        """No unread document's relevance exceeds this: the term heads, summed in rank's order."""
        lists = self._lists
        return sum(value for t in self._terms if t in lists and (value := lists[t].value) is not None)

    def _score(self, lexical: float, updated_at_ms: int, working: bool) -> float:
        """rank's formula, operation for operation."""
        top, span = self._top, self._span
        score = (lexical / top if top > 0 else 0.0) + RECENCY_WEIGHT * (
            (updated_at_ms - self._view.oldest) / span if span else 1.0)
        if working:
            score += WORKING_WEIGHT
        return round(score / MAX_SCORE, 6)

    def _read(self, memory_id: str | None) -> str | None:
        """Score-less read of one document: its relevance, once; None when nothing new was read."""
        if memory_id is None or memory_id in self._seen or memory_id in self._view.excluded:
            return None
        self._seen[memory_id] = self._lexical(self._docs[memory_id])
        return memory_id

    def _find_top(self) -> None:
        best: float = 0
        while best < self._tau():
            for term in self._lists.values():
                while (memory_id := term.take()) is not None and self._read(memory_id) is None:
                    pass
                if memory_id is not None and self._seen[memory_id] > best:
                    best = self._seen[memory_id]
        self._top = best

    def _key(self, memory_id: str) -> _Key:
        memory = self._docs[memory_id].memory
        working = self._prefer and memory.memory_type is MemoryType.WORKING
        return -self._score(self._seen[memory_id], memory.updated_at_ms, working), -memory.updated_at_ms, memory_id

    def _recents(self) -> list[_Recent]:
        part, excluded, docs = self._view.partition, self._view.excluded, self._docs
        if not self._prefer:
            return [_Recent(part.recency, excluded.__contains__, False)]
        return [_Recent(part.working, excluded.__contains__, True),
                _Recent(part.recency, lambda m: m in excluded or docs[m].memory.memory_type is MemoryType.WORKING,
                        False)]

    def run(self) -> Iterator[Ranked]:
        self._find_top()
        heap = [self._key(memory_id) for memory_id in self._seen]
        heapq.heapify(heap)
        recents = self._recents()
        while True:
            tau = self._tau()
            limits = [(-self._score(tau, -r.head[0], r.working), r.head[0], r.head[1])
                      for r in recents if r.head is not None]
            while heap and all(heap[0] < limit for limit in limits):
                key = heapq.heappop(heap)
                yield Ranked(memory=self._docs[key[2]].memory, score=-key[0])
            if not limits:
                return  # every document was read and released
            for term in self._lists.values():
                while (memory_id := term.take()) is not None and self._read(memory_id) is None:
                    pass
                if memory_id is not None:
                    heapq.heappush(heap, self._key(memory_id))
            for recent in recents:
                if (memory_id := self._read(recent.take())) is not None:
                    heapq.heappush(heap, self._key(memory_id))
