"""ULIDs (26 Crockford base32 characters: 48-bit milliseconds, then 80 random bits).

Its own module so the local flow can mint ids without the remote core's identifier grammars.
Pure: the randomness is an argument.
"""

from __future__ import annotations

__all__ = ["CROCKFORD", "encode_ulid"]

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # the ULID alphabet: Crockford base32, no I, L, O, U


def encode_ulid(now_ms: int, randomness: bytes) -> str:
    """A canonical 26-character upper-case ULID from a timestamp and 10 random bytes."""
    value = (now_ms & ((1 << 48) - 1)) << 80 | int.from_bytes(randomness[:10].rjust(10, b"\0"), "big")
    return "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))
