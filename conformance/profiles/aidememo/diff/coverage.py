"""A differential run's state coverage: the (route, status, error code, record state) pairs the reference reached.

Routes alone say little: a return route that only ever met pending handoffs never tried the
rules of a failed claim. So each step carries the *record state* the generator's model knew
before sending it: for a step that addresses a handoff its status (``pending``, ``accepted``,
``failed``: accepted with the claim's failed outcome recorded, ``expired``: accepted with the
lease run out on the test clock, ``completed``; ``unknown`` for an id the model never saw),
with what the step brings to it (``own claim``, ``fact: other session``, ``context: other
sender``, ...); for reads of mailboxes, feeds and snapshots, the handoff statuses present in the
episode. The reference's status and error code complete the pair (the target's may differ: that is
a divergence, not coverage).

The generator steers with it: its *aims* (bring a handoff to a state, then act on it in one
way) are drawn least tried first, so every state meets every action before any aim repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Coverage", "Pair"]

Pair = tuple[str, int, str, str]  # route, the reference's status, its error code ("" when none), record state
TIMELINE_EVERY_S = 1.0


@dataclass(slots=True)
class Coverage:
    """The pairs reached and the aims tried over a whole run (every episode adds to one)."""

    pairs: dict[Pair, int] = field(default_factory=dict)
    aims: dict[str, int] = field(default_factory=dict)  # aim -> times its plan was started
    makers: dict[str, tuple[int, int]] = field(default_factory=dict)  # step maker -> (steps drawn, new pairs)
    timeline: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, steps, pairs so far)

    def add(self, route: str, status: int, code: str | None, state: str) -> bool:
        """Count one answer; True when its pair is new to the run."""
        pair = (route, status, code or "", state)
        seen = self.pairs.get(pair, 0)
        self.pairs[pair] = seen + 1
        return seen == 0

    def sample(self, seconds: float, steps: int, *, last: bool = False) -> None:
        """Note the pairs reached so far, at most once per ``TIMELINE_EVERY_S`` (and at the run's end)."""
        if not self.timeline or seconds - self.timeline[-1][0] >= TIMELINE_EVERY_S or last:
            self.timeline.append((round(seconds, 2), steps, len(self.pairs)))

    def states(self) -> set[tuple[str, str]]:
        """The (route, record state) pairs reached, whatever the answer."""
        return {(route, state) for route, _, _, state in self.pairs}

    def to_dict(self) -> dict[str, Any]:
        reached = [{"route": route, "status": status, "code": code, "state": state, "count": count}
                   for (route, status, code, state), count in sorted(self.pairs.items())]
        return {"pairs": len(self.pairs), "route_states": len(self.states()), "reached": reached,
                "aims": dict(sorted(self.aims.items())),
                "makers": {name.lstrip("_"): {"steps": steps, "new_pairs": new}
                           for name, (steps, new) in sorted(self.makers.items())},
                "timeline": [list(point) for point in self.timeline]}
