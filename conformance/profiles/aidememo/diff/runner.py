"""The differential run: episodes of generated steps until the budget is spent, then shrinking and the report.

A run is a series of episodes (fresh identities each, ``EPISODE_STEPS`` steps at most), each
drawn from a seed the run's seed derives, until ``--steps`` steps were sent or ``--budget``
seconds passed. Every answer of the reference adds to the run's state coverage (``coverage``),
which steers the generator. The first divergence ends the run: its episode's steps are shrunk
(delta debugging over the recorded sequence, each trial a fresh episode on both sides) to the
shortest sequence whose last step still diverges on the same route and field, and written as a
case file that ``diff --replay`` runs again. ``--budget`` bounds the whole run, shrinking
included: shrinking stops where the budget ends, with the shortest sequence found so far.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.profiles.aidememo.diff.compare import Departures, requirements_of
from conformance.profiles.aidememo.diff.coverage import Coverage
from conformance.profiles.aidememo.diff.episode import Episode, Outcome
from conformance.profiles.aidememo.diff.sides import Side
from conformance.profiles.aidememo.diff.generator import Generator
from conformance.profiles.aidememo.diff.steps import Step
from refkit.files import write_atomic
from refkit.jsonvalue import loads

__all__ = ["Divergence", "Result", "run", "replay", "shrink"]

EPISODE_STEPS = 60  # room for a few aims' plans (10 to 25 steps each) between random steps
CASE_VERSION = 1


@dataclass(slots=True)
class Divergence:
    """A shrunk divergence: the steps, the last one's two answers, what it touches."""

    steps: list[Step]
    outcome: Outcome
    found_after: int  # steps in the episode before shrinking
    requirements: list[str]
    before: list[Outcome] = field(default_factory=list)  # the answers to the steps before the last
    shrunk: bool = True  # False: the budget ended before shrinking did

    @property
    def signature(self) -> tuple[str, str]:
        assert self.outcome.field is not None
        return self.outcome.step.route, self.outcome.field[0]

    def to_dict(self) -> dict[str, Any]:
        assert self.outcome.field is not None
        where, ours, theirs = self.outcome.field
        return {"route": self.outcome.step.route, "field": where, "target_value": ours, "reference_value": theirs,
                "requirements": self.requirements, "found_after_steps": self.found_after, "shrunk": self.shrunk,
                "steps": [step.to_dict() for step in self.steps],
                "target": self.outcome.target.to_dict(), "reference": self.outcome.reference.to_dict()}


@dataclass(slots=True)
class Result:
    seed: int
    steps: int = 0
    episodes: int = 0
    seconds: float = 0.0
    routes: dict[str, int] = field(default_factory=dict)  # route -> steps sent
    tolerated: dict[str, int] = field(default_factory=dict)  # departure reason -> times met
    divergences: list[Divergence] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    found_at_s: float | None = None  # when the first divergence came, before shrinking


class Sides:
    """The target and the reference, and fresh namespaces for their episodes."""

    def __init__(self, target: Side, reference: Side, departures: Departures) -> None:
        self.target = target
        self.reference = reference
        self.departures = departures
        self.tag = secrets.token_hex(3)
        self._count = 0

    def episode(self) -> Episode:
        self._count += 1
        episode = Episode(self.target, self.reference, f"{self.tag}-{self._count}", self.departures)
        episode.start()
        return episode


def run(sides: Sides, *, seed: int, budget_s: float, max_steps: int, clock: bool, mcp: bool,
        progress: Callable[[str], None] = lambda line: None,
        on_step: Callable[[Result], None] = lambda result: None) -> Result:
    """Episodes of generated steps until ``max_steps`` or ``budget_s``; the first divergence is shrunk
    in what is left of ``budget_s``. ``on_step`` sees the result after every step (a bench's sampler)."""
    result = Result(seed)
    rng = random.Random(seed)
    started = time.monotonic()
    deadline = started + budget_s
    while result.steps < max_steps and time.monotonic() < deadline:
        found = _episode(sides, result, random.Random(rng.getrandbits(64)), started, deadline, max_steps, clock,
                         mcp, on_step)
        if found is not None:
            result.found_at_s = time.monotonic() - started
            progress(f"divergence after {len(found)} steps of episode {result.episodes} "
                     f"({result.found_at_s:.1f} s); shrinking")
            result.divergences.append(shrink(sides, found, deadline=deadline))
            break
    result.seconds = time.monotonic() - started
    result.coverage.sample(result.seconds, result.steps, last=True)
    return result


def _episode(sides: Sides, result: Result, rng: random.Random, started: float, deadline: float, max_steps: int,
             clock: bool, mcp: bool, on_step: Callable[[Result], None]) -> list[Outcome] | None:
    """One episode's steps, counted into ``result``; its outcomes when the last one diverged."""
    steps = min(EPISODE_STEPS, max_steps - result.steps)
    generator = Generator(rng, clock=clock, mcp=mcp, coverage=result.coverage, steps=steps)
    episode = sides.episode()
    result.episodes += 1
    outcomes: list[Outcome] = []
    for _ in range(steps):
        if time.monotonic() >= deadline:
            break
        step = generator.next()
        outcome = episode.send(step)
        outcomes.append(outcome)
        result.steps += 1
        result.routes[step.route] = result.routes.get(step.route, 0) + 1
        if outcome.tolerated is not None:
            result.tolerated[outcome.tolerated.reason] = result.tolerated.get(outcome.tolerated.reason, 0) + 1
        if outcome.diverged:
            return outcomes
        generator.observe(outcome.reference.status, outcome.reference_data, outcome.reference.error_code)
        result.coverage.sample(time.monotonic() - started, result.steps)
        on_step(result)
    return None


def _diverges_like(sides: Sides, steps: list[Step], signature: tuple[str, str],
                   deadline: float) -> list[Outcome] | None:
    outcomes = sides.episode().run(steps, lambda outcome: time.monotonic() < deadline)
    last = outcomes[-1] if outcomes else None
    if last is None or not last.diverged or len(outcomes) != len(steps) or last.field is None:
        return None
    return outcomes if (last.step.route, last.field[0]) == signature else None


def shrink(sides: Sides, found: list[Outcome], *, deadline: float) -> Divergence:
    """The shortest sequence found by ``deadline`` whose last step diverges like the last of ``found``
    (ddmin over the prefix)."""
    outcome = found[-1]
    assert outcome.field is not None
    signature = (outcome.step.route, outcome.field[0])
    found_after = len(found)
    prefix, last, best = [o.step for o in found[:-1]], outcome.step, found
    chunk, done = max(1, len(prefix) // 2), False
    while prefix and time.monotonic() < deadline:
        removed, start, complete = False, 0, True
        while start < len(prefix):
            if time.monotonic() >= deadline:
                complete = False
                break
            candidate = prefix[:start] + prefix[start + chunk:]
            got = _diverges_like(sides, [*candidate, last], signature, deadline)
            if got is not None:
                prefix, best, removed = candidate, got, True
            else:
                start += chunk
        if removed:
            chunk = max(1, min(chunk, len(prefix) // 2))
        elif not complete:
            break
        elif chunk == 1:
            done = True
            break
        else:
            chunk //= 2
    done = done or not prefix
    final = best[-1]
    codes = (final.target.error_code, final.reference.error_code)
    return Divergence([*prefix, last], final, found_after, requirements_of(final.step.route, codes), best[:-1],
                      shrunk=done)


def replay(sides: Sides, steps: list[Step]) -> list[Outcome]:
    """The recorded steps once more, on fresh identities."""
    return sides.episode().run(steps)


def write_case(path: Path, divergence: Divergence, seed: int) -> None:
    data = {"version": CASE_VERSION, "seed": seed, **divergence.to_dict()}
    write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def read_case(path: Path) -> list[Step]:
    """The steps of a case file.

    Raises:
        ValueError: not a case file of this version (the message says what is wrong).
    """
    try:
        data = loads(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != CASE_VERSION or not isinstance(data.get("steps"), list):
        raise ValueError(f"{path} is not a diff case file (version {CASE_VERSION} with steps)")
    try:
        return [Step.of(step) for step in data["steps"]]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"{path}: a step lacks {exc}") from None
