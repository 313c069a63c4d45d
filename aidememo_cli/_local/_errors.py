"""Local error codes and their Display texts (the embedded core's ``AideMemoError``).

The local flow never answers with wire codes such as ``stale_revision``: a stale writer gets
``transaction_conflict`` and an illegal transition gets ``invalid_input`` with a sentence.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AideMemoCliError", "LocalErrorCode", "LocalError", "invalid_input"]


class AideMemoCliError(Exception):
    """Root of every exception the command line defines: ``LocalError`` here (the remote flow's
    ``RemoteError`` is one), the MCP server's ``ToolError`` and the commands' own refusals."""


class LocalErrorCode(StrEnum):
    """Error codes of the embedded store, spelled as upstream reports them."""

    INVALID_INPUT = "invalid_input"
    TRANSACTION_CONFLICT = "transaction_conflict"
    ENTITY_NOT_FOUND = "entity_not_found"
    FACT_NOT_FOUND = "fact_not_found"
    # The store itself failed (unreadable file, lock held too long); details are in the text.
    STORAGE_FAILURE = "storage_failure"
    # A step outside the store failed (the worker lane, a file write); upstream's ``Internal``.
    INTERNAL = "internal"


class LocalError(AideMemoCliError):
    """A refusal of the local flow; ``str()`` is the upstream Display text."""

    def __init__(self, code: LocalErrorCode, detail: str = "") -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail

    def __str__(self) -> str:
        match self.code:
            case LocalErrorCode.INVALID_INPUT:
                return f"invalid input: {self.detail}"
            case LocalErrorCode.TRANSACTION_CONFLICT:
                return "transaction conflict (concurrent write): retry needed"
            case LocalErrorCode.ENTITY_NOT_FOUND:
                return f"entity not found: '{self.detail}'"
            case LocalErrorCode.FACT_NOT_FOUND:
                return f"fact not found: '{self.detail}'"
            case LocalErrorCode.STORAGE_FAILURE:
                return f"storage failure: {self.detail}"
            case LocalErrorCode.INTERNAL:
                return f"internal error: {self.detail}"
        raise AssertionError(self.code)  # unreachable: the match is exhaustive


def invalid_input(detail: str) -> LocalError:
    """Build the most common refusal."""
    return LocalError(LocalErrorCode.INVALID_INPUT, detail)
