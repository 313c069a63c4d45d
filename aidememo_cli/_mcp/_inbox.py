"""``aidememo_handoff_inbox``'s actions: each backend keeps one table, action name -> handler.

The table's order is the order upstream's refusal of an unknown action lists them in, so the
wording is built from the table and cannot drift from what the backend runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._protocol import ToolError

__all__ = ["action_of", "unknown_action"]


def action_of(args: Mapping[str, Any]) -> str:
    """The requested action; upstream lists when ``action`` is absent or not a string."""
    action = args.get("action")
    return action if isinstance(action, str) else "list"


def unknown_action(action: str, known: Iterable[str]) -> ToolError:
    """Upstream's refusal of an action the backend's table lacks."""
    *first, last = known
    return ToolError(f"unknown handoff inbox action {json.dumps(action)}; expected {', '.join(first)}, or {last}")
