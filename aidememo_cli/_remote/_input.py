"""The remote flow's own input checks, made before any request."""

from __future__ import annotations

from aidememo_wire.ids import id_problem

from ._errors import refusal

__all__ = ["validate_id", "reject_actor_override"]


def validate_id(label: str, value: str) -> str:
    if id_problem(value) is not None:
        raise refusal(f"{label} is not a valid remote identifier")
    return value


def reject_actor_override(value: str | None) -> None:
    """Remote identity comes only from the bearer binding."""
    if value is not None:
        raise refusal("--actor-id/--from cannot override actor identity for a remote profile")
