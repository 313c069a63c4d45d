"""Lexical search over facts: upstream's tokenizer and BM25 (wire spec §5.5).

Scores are implementation-defined upstream (§8 item 8); this reproduces the formula so that
order and presence match, and the values do for plain text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Final

__all__ = ["tokenize", "bm25", "K1", "B"]

K1: Final = 1.2
B: Final = 0.75
_SPLIT = re.compile(r"[^\w]|_", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Split on every non-alphanumeric character, drop empty pieces, lowercase (CJK kept)."""
    return [piece.lower() for piece in _SPLIT.split(text) if piece]


def term_counts(text: str) -> tuple[Counter[str], int]:
    tokens = tokenize(text)
    return Counter(tokens), len(tokens)


def bm25(*, tf: int, df: int, n_docs: int, doc_len: int, avg_len: float) -> float:
    idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    avg = max(avg_len, 1.0)
    return idf * ((tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * doc_len / avg)))
