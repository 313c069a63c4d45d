"""Upstream's text predicates: Rust's ``str::trim`` and ``to_ascii_lowercase``.

Python's ``str.strip()`` also removes U+001C..U+001F (the information separators), which
Rust's ``char::is_whitespace`` (the Unicode White_Space property) keeps, and ``str.lower()``
folds non-ASCII letters too. Wherever upstream trims or lower-cases, the reference uses these.
"""

from __future__ import annotations

import string
from typing import Final

__all__ = ["RUST_WHITESPACE", "trim", "ascii_lower"]

RUST_WHITESPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def trim(text: str) -> str:
    """``str::trim``: strip leading and trailing White_Space characters, nothing else."""
    return text.strip(RUST_WHITESPACE)


def ascii_lower(text: str) -> str:
    """``str::to_ascii_lowercase``: A-Z become a-z; every other character is kept."""
    return text.translate(_ASCII_LOWER)
