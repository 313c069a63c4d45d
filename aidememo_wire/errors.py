"""Wire error codes and the one exception the ledger raises.

Every refusal leaves the core as a ``LedgerError`` carrying an ``ErrorCode``; the HTTP adapter
turns it into ``{"error":{"code","message"}}`` with the code's status, in one place.
Codes, statuses and message templates follow upstream ``dom/error.rs`` and
``srv/lib.rs status_for_error`` (wire spec §3.2).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ErrorCode", "LedgerError", "WireError"]


class ErrorCode(StrEnum):
    """A wire error code; ``.status`` is its HTTP status."""

    INVALID_IDENTIFIER = "invalid_identifier"
    IDENTITY_MISMATCH = "identity_mismatch"
    AUTHENTICATION_FAILED = "authentication_failed"
    PROJECT_UNAUTHORIZED = "project_unauthorized"
    PROJECT_SCOPE_MISMATCH = "project_scope_mismatch"
    COMMAND_CONFLICT = "command_conflict"
    HANDOFF_ACTOR_MISMATCH = "handoff_actor_mismatch"
    HANDOFF_CONFLICT = "handoff_conflict"
    STALE_REVISION = "stale_revision"
    RESOURCE_NOT_FOUND = "resource_not_found"
    RESOURCE_ALREADY_EXISTS = "resource_already_exists"
    CURSOR_EPOCH_MISMATCH = "cursor_epoch_mismatch"
    CURSOR_OUT_OF_RANGE = "cursor_out_of_range"
    INVALID_CHANGE_BATCH = "invalid_change_batch"
    SNAPSHOT_REQUIRED = "snapshot_required"
    SNAPSHOT_TOO_LARGE = "snapshot_too_large"
    CONFORMANCE_VIOLATION = "conformance_violation"
    INVALID_COMMAND = "invalid_command"
    STORAGE_FAILURE = "storage_failure"

    @property
    def status(self) -> int:
        return _STATUS[self]


_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_IDENTIFIER: 400,
    ErrorCode.IDENTITY_MISMATCH: 403,
    ErrorCode.AUTHENTICATION_FAILED: 401,
    ErrorCode.PROJECT_UNAUTHORIZED: 403,
    ErrorCode.PROJECT_SCOPE_MISMATCH: 403,
    ErrorCode.COMMAND_CONFLICT: 409,
    ErrorCode.HANDOFF_ACTOR_MISMATCH: 403,
    ErrorCode.HANDOFF_CONFLICT: 409,
    ErrorCode.STALE_REVISION: 409,
    ErrorCode.RESOURCE_NOT_FOUND: 404,
    ErrorCode.RESOURCE_ALREADY_EXISTS: 409,
    ErrorCode.CURSOR_EPOCH_MISMATCH: 409,
    ErrorCode.CURSOR_OUT_OF_RANGE: 409,
    ErrorCode.INVALID_CHANGE_BATCH: 400,
    ErrorCode.SNAPSHOT_REQUIRED: 409,
    ErrorCode.SNAPSHOT_TOO_LARGE: 413,
    ErrorCode.CONFORMANCE_VIOLATION: 500,
    ErrorCode.INVALID_COMMAND: 400,
    ErrorCode.STORAGE_FAILURE: 500,
}


class WireError(Exception):
    """Root of every exception aidememo_wire defines: ``LedgerError`` here, ``JsonError``
    (``canonical``, also a ``ValueError``)."""


class LedgerError(WireError):
    """A refusal with its wire code and message (the message is what goes on the wire)."""

    def __init__(self, code: ErrorCode, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = code.status if status is None else status

    # Constructors for the templated messages, so every caller spells them the same way.
    @classmethod
    def invalid_command(cls, detail: str) -> LedgerError:
        return cls(ErrorCode.INVALID_COMMAND, f"invalid command: {detail}")

    @classmethod
    def invalid_identifier(cls, kind: str, reason: str) -> LedgerError:
        return cls(ErrorCode.INVALID_IDENTIFIER, f"invalid {kind}: {reason}")

    @classmethod
    def handoff_conflict(cls, detail: str) -> LedgerError:
        return cls(ErrorCode.HANDOFF_CONFLICT, f"handoff conflict: {detail}")

    @classmethod
    def stale_revision(cls, expected: int, current: int) -> LedgerError:
        return cls(ErrorCode.STALE_REVISION, f"stale revision: expected {expected}, current {current}")

    @classmethod
    def not_found(cls) -> LedgerError:
        return cls(ErrorCode.RESOURCE_NOT_FOUND, "resource not found")

    @classmethod
    def already_exists(cls) -> LedgerError:
        return cls(ErrorCode.RESOURCE_ALREADY_EXISTS, "resource already exists")

    @classmethod
    def command_conflict(cls) -> LedgerError:
        return cls(ErrorCode.COMMAND_CONFLICT, "command ID was already used with a different request")

    @classmethod
    def unauthenticated(cls) -> LedgerError:
        return cls(ErrorCode.AUTHENTICATION_FAILED, "authentication failed")

    @classmethod
    def unauthorized(cls, project_id: str) -> LedgerError:
        # Upstream says "mutate" for read routes too (wire spec §8 item 12).
        return cls(ErrorCode.PROJECT_UNAUTHORIZED, f"actor is not authorized to mutate project {project_id}")

    @classmethod
    def actor_mismatch(cls) -> LedgerError:
        return cls(
            ErrorCode.HANDOFF_ACTOR_MISMATCH,
            "authenticated actor is not allowed to perform this handoff action",
        )

    @classmethod
    def storage_failure(cls, *, unavailable: bool = False) -> LedgerError:
        if unavailable:
            return cls(ErrorCode.STORAGE_FAILURE, "canonical storage temporarily unavailable", status=503)
        return cls(ErrorCode.STORAGE_FAILURE, "internal server error")
