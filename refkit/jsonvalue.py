"""The type of a parsed JSON value, as ``json.loads`` returns it (serde_json's ``Value``), and a
loader for JSON someone else wrote whose nesting is bounded.

``json.loads`` of ``[[[[...`` nested 10,000 levels raises ``RecursionError``, which no
``except ValueError`` catches; nested a little less, it succeeds and the first recursive walk of
the value (a comparison, a copy, a report) raises it instead. ``loads`` refuses both as a
``ValueError``, so every parser that already treats "not JSON" as the other side's fault does
the same for "too deep".
"""

from __future__ import annotations

import json
from typing import Any, TypeAlias

__all__ = ["Json", "MAX_DEPTH", "loads"]

Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]

# No answer of the protocols the kit speaks, and no file it writes, nests past a dozen levels;
# 100 leaves room for client payloads and stays far below the interpreter's recursion limit
# (1000), which the kit's recursive walks of a value spend a few frames a level of.
MAX_DEPTH = 100


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads``, with a value nested deeper than ``max_depth`` refused. Typed ``Any`` as
    ``json.loads`` is: what the caller reads of it, it checks (a ``Json`` at run time).

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), not UTF-8 (``UnicodeDecodeError``), or
            nested deeper than ``max_depth``.
    """
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    opening = data.count("[") + data.count("{") if isinstance(data, str) else data.count(b"[") + data.count(b"{")
    if opening < max_depth:
        return value  # too few brackets to nest that deep: no walk needed
    # Level by level, carrying only containers: a feed's answer is mostly scalars, and walking
    # each of them cost four times the parse (bench/sim.py's ActorVisibility reads such feeds).
    level: list[dict[str, Json] | list[Json]] = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth >= max_depth and any(level):  # a container this deep holds something
            raise ValueError(f"JSON nested deeper than {max_depth} levels")
        level = [child for item in level for child in (item.values() if isinstance(item, dict) else item)
                 if isinstance(child, (dict, list))]
        depth += 1
    return value
