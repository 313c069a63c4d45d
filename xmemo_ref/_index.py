"""What recall ranks from: a tenant's memories as documents, kept behind its writes.

A ``Partition`` holds the memories of one tenant, or of one scope of it (the filter the
published clients send), as documents: the term counts of ``content`` and ``path`` (the text
``_recall.rank`` scores), their length, and the orders the exact ranking walks (``_ranking``):

* per term, the documents grouped by (term frequency, length), the two things besides the
  corpus statistics that decide the term's BM25 contribution, so a term's documents can be read
  in descending order of it;
* how many documents hold each term, and their total length;
* every document by recency, newest first and ties to the smaller id (``rank``'s tie order),
  and the working ones again on their own;
* the documents that expire, by expiry.

A tenant's ``RecallIndex`` builds a partition on the first recall that needs it and brings it up
to date at each later one from the ids the tenant's writes touched (its journal), so a capture
only notes an id: the tokenizing is paid once per memory version, by the next recall.
"""

from __future__ import annotations

from collections import Counter

from sortedcontainers import SortedList

from refkit.search import tokenize
from ._records import Memory, MemoryType

__all__ = ["Doc", "Partition", "RecallIndex"]


class Doc:
    """One memory version as recall scores it."""

    __slots__ = ("memory", "terms", "length", "key")

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.terms: Counter[str] = Counter(tokenize(f"{memory.content} {memory.path}"))
        self.length = sum(self.terms.values())
        self.key = (-memory.updated_at_ms, memory.id)  # recency order: newest first, then the smaller id


class Partition:
    """The documents of one tenant (``scope`` None) or one of its scopes; see the module docstring."""

    def __init__(self) -> None:
        self.docs: dict[str, Doc] = {}
        self.postings: dict[str, dict[tuple[int, int], set[str]]] = {}  # term -> (tf, length) -> ids
        self.df: Counter[str] = Counter()
        self.total = 0  # the documents' lengths, summed
        self.recency: SortedList[tuple[int, str]] = SortedList()
        self.working: SortedList[tuple[int, str]] = SortedList()
        self.expiring: SortedList[tuple[int, str]] = SortedList()  # (expires_at_ms, id)
        self.cursor = 0  # how much of the tenant's journal this partition has applied
        # No document's id is shorter (kept through removals: a bound, not the minimum); lets
        # packing stop once no entry can fit (``_recall.pack``).
        self.shortest_id: int | None = None

    def add(self, doc: Doc) -> None:
        memory, postings, length = doc.memory, self.postings, doc.length
        self.docs[memory.id] = doc
        if self.shortest_id is None or len(memory.id) < self.shortest_id:
            self.shortest_id = len(memory.id)
        for term, tf in doc.terms.items():
            groups = postings.get(term)
            if groups is None:
                groups = postings[term] = {}
            ids = groups.get((tf, length))
            if ids is None:
                groups[(tf, length)] = {memory.id}
            else:
                ids.add(memory.id)
        self.df.update(doc.terms.keys())
        self.total += doc.length
        self.recency.add(doc.key)
        if memory.memory_type is MemoryType.WORKING:
            self.working.add(doc.key)
        if memory.expires_at_ms is not None:
            self.expiring.add((memory.expires_at_ms, memory.id))

    def remove(self, doc: Doc) -> None:
        memory = doc.memory
        del self.docs[memory.id]
        for term, tf in doc.terms.items():
            groups = self.postings[term]
            ids = groups[(tf, doc.length)]
            ids.discard(memory.id)
            if not ids:
                del groups[(tf, doc.length)]
                if not groups:
                    del self.postings[term]
            self.df[term] -= 1
            if not self.df[term]:
                del self.df[term]
        self.total -= doc.length
        self.recency.remove(doc.key)
        if memory.memory_type is MemoryType.WORKING:
            self.working.remove(doc.key)
        if memory.expires_at_ms is not None:
            self.expiring.remove((memory.expires_at_ms, memory.id))


class RecallIndex:
    """One tenant's partitions: the whole tenant and each scope a recall asked for."""

    def __init__(self) -> None:
        self._docs: dict[str, Doc] = {}  # each id's latest document, shared by the partitions
        self._partitions: dict[str | None, Partition] = {}
        self._journal: list[str] = []  # ids written since the slowest partition last caught up

    def changed(self, memory_id: str) -> None:
        self._journal.append(memory_id)

    def _doc(self, memory: Memory) -> Doc:
        doc = self._docs.get(memory.id)
        if doc is None or doc.memory is not memory:
            doc = self._docs[memory.id] = Doc(memory)
        return doc

    def partition(self, memories: dict[str, Memory], scope: str | None) -> Partition:
        """The partition of ``scope`` (None: every memory), up to date with ``memories``."""
        part = self._partitions.get(scope)
        if part is None:
            part = self._partitions[scope] = Partition()
            for memory in memories.values():
                if scope is None or memory.scope == scope:
                    part.add(self._doc(memory))
        else:
            for memory_id in dict.fromkeys(self._journal[part.cursor:]):  # each id once, in order
                memory = memories[memory_id]
                old = part.docs.get(memory_id)
                if old is not None:
                    if old.memory is memory:
                        continue
                    part.remove(old)
                if scope is None or memory.scope == scope:
                    part.add(self._doc(memory))
        part.cursor = len(self._journal)
        if all(p.cursor == part.cursor for p in self._partitions.values()):
            self._journal.clear()
            for p in self._partitions.values():
                p.cursor = 0
        return part
