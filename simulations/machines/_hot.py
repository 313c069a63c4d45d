"""The state machines' shortcuts: each stands for code that stays the statement of what it does.

Why this module exists: ``bench/sim.py`` counts the machines' steps per second, and a machine's
step is mostly Hypothesis, the embedded ledger and JSON; what is the simulator's own to save is
kept plain elsewhere, and the one trick that reaches into Hypothesis is here.

* ``LeanInvariants.check_invariants`` runs a machine's invariants as Hypothesis's
  ``RuleBasedStateMachine.check_invariants`` does (the same order and skips, the same
  ``state.name()`` lines when steps are printed, the same run times, the same health check on a
  returned value), but asks the build context, the verbosity and observability once per step
  instead of once per invariant. The machines run a dozen invariants after every step, and
  those three questions cost ``ActorVisibility`` about 160,000 instructions of its 4.5 million
  a step (``python bench/sim.py --skip-checker ...`` prints the machine both ways). It stands
  for the Hypothesis source it was written against (``WRITTEN_AGAINST``, a digest of that
  method's text): with any other, Hypothesis's own method runs. ``tests/sim/test_hot.py`` holds
  both ways to the same calls, output and run times.
* ``query`` writes a read's query string itself when every name and value is an int or a word
  of the characters ``urlencode`` leaves as they are (the machines' listings: a box, a limit, an
  epoch, a cursor), and hands anything else to ``urlencode``: its quoting is a few function
  calls per character class and value, for three or four plain words a listing read
  (``tests/sim/test_hot.py`` holds it equal to ``urlencode``).
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any, ClassVar
from urllib.parse import urlencode

from hypothesis import HealthCheck
from hypothesis.stateful import RuleBasedStateMachine

__all__ = ["LeanInvariants", "WRITTEN_AGAINST", "lean_applies", "query"]

# sha256 of ``inspect.getsource(RuleBasedStateMachine.check_invariants)`` in Hypothesis 6.170.27.
WRITTEN_AGAINST = "6b3c601491da731b907c11cec36fb5588579a4ad9818d61232fb4a80b1348a7f"

_applies: bool | None = None  # decided once per process, at the first step
_loud: Callable[[Any], bool]  # (settings) -> whether this step's invariants are printed
_health: Callable[..., None]  # hypothesis.internal.healthcheck.fail_health_check


def _hypothesis_source_digest() -> str | None:
    try:
        source = inspect.getsource(RuleBasedStateMachine.check_invariants)
    except (OSError, TypeError):  # no source shipped: the shortcut cannot be vouched for
        return None
    return hashlib.sha256(source.encode()).hexdigest()


def lean_applies() -> bool:
    """Whether the installed Hypothesis is the one the shortcut stands for."""
    global _applies, _loud, _health
    if _applies is None:
        _applies = False
        if _hypothesis_source_digest() == WRITTEN_AGAINST:
            from hypothesis._settings import Verbosity
            from hypothesis.control import current_build_context
            from hypothesis.internal.healthcheck import fail_health_check
            from hypothesis.internal.observability import observability_enabled

            def loud(settings: Any) -> bool:
                return bool(current_build_context().is_final or settings.verbosity >= Verbosity.debug
                            or observability_enabled())

            _loud, _health, _applies = loud, fail_health_check, True
    return _applies


class LeanInvariants(RuleBasedStateMachine):
    """A machine whose invariants run through the shortcut above (when it applies)."""

    # None: the shortcut when it applies; False: Hypothesis's own method (the bench's baseline).
    lean: ClassVar[bool | None] = None

    def check_invariants(self, *args: Any, **kwargs: Any) -> None:
        if kwargs or len(args) != 3 or self.lean is False or not lean_applies():
            super().check_invariants(*args, **kwargs)
            return
        settings, output, runtimes = args
        loud = _loud(settings)
        initializing = bool(self._initialize_rules_to_run)
        for invar in self.invariants:
            if initializing and not invar.check_during_init:
                continue
            if invar.preconditions and not all(precond(self) for precond in invar.preconditions):
                continue
            name = invar.function.__name__
            if loud:
                output(f"state.{name}()")
            start = perf_counter()
            result = invar.function(self)
            runtimes[f"execute:invariant:{name}"] += perf_counter() - start
            if result is not None:
                _health(settings, "The return value of an @invariant is always ignored, but "
                        f"{invar.function.__qualname__} returned {result!r} instead of None",
                        HealthCheck.return_value)


_PLAIN = re.compile(r"[A-Za-z0-9_.~-]+")  # what quote_plus leaves as it is (RFC 3986 unreserved)


def query(params: Mapping[str, object]) -> str:
    """``urlencode`` of the params that are not None."""
    pairs = [(k, v) for k, v in params.items() if v is not None]
    for name, value in pairs:
        if not (_PLAIN.fullmatch(name) and (type(value) is int or type(value) is str and _PLAIN.fullmatch(value))):
            return urlencode(pairs)
    return "&".join(f"{name}={value}" for name, value in pairs)
