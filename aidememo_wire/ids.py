"""Identifier grammars (wire spec §0.5) and the ids clients derive (§7.3).

Pure functions: no I/O, no randomness except ``encode_ulid``, which takes its inputs.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from refkit.ulid import CROCKFORD, encode_ulid

if TYPE_CHECKING:
    from _hashlib import HASH

__all__ = [
    "MAX_ID_BYTES",
    "MAX_NAME_BYTES",
    "ID_PATTERN",
    "NAME_PATTERN",
    "check_id",
    "check_name",
    "stable_operation_id",
    "stable_claim_id",
    "bearer_digest",
    "MAX_BEARER_BYTES",
    "BAD_TOKEN_BYTE",
    "token_problem",
    "encode_ulid",
    "CROCKFORD",
]

MAX_ID_BYTES = 128  # dom/identity.rs MAX_ID_BYTES
MAX_NAME_BYTES = 96  # dom/command.rs MAX_NAME_BYTES
_ID_CHARS, _NAME_CHARS = "A-Za-z0-9._:@-", "a-z0-9._-"
_ID_RE = re.compile(f"[{_ID_CHARS}]+\\Z")
_NAME_RE = re.compile(f"[{_NAME_CHARS}]+\\Z")
# Whole grammars as patterns (the classes are ASCII, so characters are bytes), and their tests in
# one call each: a match is exactly ``id_problem``/``name_problem`` None.
ID_PATTERN = f"[{_ID_CHARS}]{{1,{MAX_ID_BYTES}}}"
NAME_PATTERN = f"[{_NAME_CHARS}]{{1,{MAX_NAME_BYTES}}}"
valid_id = re.compile(ID_PATTERN).fullmatch
valid_name = re.compile(NAME_PATTERN).fullmatch


def id_problem(value: str) -> str | None:
    """The upstream reason a string id is invalid, or None when it is valid."""
    if valid_id(value) is not None:
        return None  # every id of every request passes here: the common case first
    if not value:
        return "must not be empty"
    if len(value.encode("utf-8")) > MAX_ID_BYTES:
        return "must be at most 128 bytes"
    if not value.isascii() or _ID_RE.match(value) is None:
        return "must contain only ASCII letters, digits, '-', '_', '.', ':', or '@'"
    return None


def check_id(kind: str, value: str) -> str:
    """Validate a path-segment id; raises ``invalid_identifier`` naming the field."""
    problem = id_problem(value)
    if problem is not None:
        from .errors import LedgerError  # here: bootstrap and the local flow check ids and raise nothing

        raise LedgerError.invalid_identifier(kind, problem)
    return value


def name_problem(kind: str, value: str) -> str | None:
    if valid_name(value) is not None:
        return None  # the common case first
    if not value or len(value.encode("utf-8")) > MAX_NAME_BYTES:
        return f"invalid {kind}: must contain 1 to 96 bytes"
    if not value.isascii() or _NAME_RE.match(value) is None:
        return f"invalid {kind}: must contain only lowercase ASCII letters, digits, '.', '-', or '_'"
    return None


def check_name(kind: str, value: str) -> str:
    """Validate an operation name or resource kind in a path segment."""
    problem = name_problem(kind, value)
    if problem is not None:
        from .errors import ErrorCode, LedgerError

        raise LedgerError(ErrorCode.INVALID_IDENTIFIER, problem)
    return value


def stable_operation_id(prefix: str, parts: list[str] | tuple[str, ...]) -> str:
    """``prefix_<sha256 hex>`` over length-prefixed parts (upstream ``stable_operation_id``).

    Each piece is preceded by its UTF-8 byte length as a big-endian u64, so ``["ab","c"]`` and
    ``["a","bc"]`` differ.
    """
    digest = _sha256()(b"")
    for piece in (prefix, *parts):
        raw = piece.encode("utf-8")
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return f"{prefix}_{digest.hexdigest()}"


def stable_claim_id(project_id: str, actor_id: str, handoff_id: str, attempt: int) -> str:
    """The claim the remote CLI derives for attempt number ``attempt`` (§7.3)."""
    return stable_operation_id("claim", [project_id, actor_id, handoff_id, str(attempt)])


# A bearer token is 1 to 4096 bytes of visible ASCII, no whitespace (wire spec §4.1 step 4): the
# one statement of the grammar, which the server's request path tests as bytes.
MAX_BEARER_BYTES = 4_096
BAD_TOKEN_BYTE = re.compile(rb"[^\x21-\x7e]")


def token_problem(token: str) -> str | None:
    """Why a bearer token would be refused, or None."""
    raw = token.encode("utf-8")
    if not raw:
        return "token must not be empty"
    if len(raw) > MAX_BEARER_BYTES:
        return f"token must be at most {MAX_BEARER_BYTES} bytes"
    if BAD_TOKEN_BYTE.search(raw):
        return "token must be visible ASCII without whitespace or control characters"
    return None


def bearer_digest(token: str) -> bytes:
    """SHA-256 of the token's UTF-8 bytes: the only form in which tokens are stored (§7.1)."""
    return _sha256()(token.encode("utf-8")).digest()


@functools.cache
def _sha256() -> Callable[[bytes], HASH]:
    """SHA-256: CPython's own (``_sha2``, ``_sha256`` before 3.12) where the build has it, else
    hashlib's. hashlib loads OpenSSL first, 11M instructions, a sixth of what ``aidememo-ref
    bootstrap`` runs past the interpreter's start-up to hash one token (once per identity the
    suite provisions), and of a remote command's that derives an id (bench/cli.py)."""
    for name in ("_sha2", "_sha256"):
        try:
            constructor: Callable[[bytes], HASH] = importlib.import_module(name).sha256
        except (ImportError, AttributeError):  # a build without it (some distributions leave it out)
            continue
        return constructor
    import hashlib

    return hashlib.sha256

