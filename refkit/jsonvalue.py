"""The type of a parsed JSON value, as ``json.loads`` returns it (serde_json's ``Value``)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["Json"]

Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]
