"""The state machines' shortcut (``simulations.machines._hot``) held to the Hypothesis code it
stands for: the same invariant calls, the same printed steps, the same run times, the same
health check, and Hypothesis's own method wherever its source is not the one written against;
the same query strings as ``urlencode``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FailedHealthCheck
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from hypothesis.stateful import run_state_machine_as_test as _run

from simulations.machines import _hot
from simulations.machines._hot import LeanInvariants, lean_applies, query

SETTINGS = settings(max_examples=30, stateful_step_count=8, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


class Counter(LeanInvariants):
    """Invariants of every kind Hypothesis's loop tells apart: one checked during initialization,
    one behind a precondition, plain ones; each logs its call and the run times it saw before."""

    log: ClassVar[list[Any]] = []
    fail_at: ClassVar[int | None] = None  # the value at which ``small`` fails

    def __init__(self) -> None:
        super().__init__()
        self.value = 0

    def check_invariants(self, *args: Any, **kwargs: Any) -> None:
        super().check_invariants(*args, **kwargs)
        self.log.append(("times", sorted(args[2]) if len(args) == 3 else None))

    @initialize(start=st.integers(0, 3))
    def begin(self, start: int) -> None:
        self.value = start

    @rule(by=st.integers(1, 3))
    def add(self, by: int) -> None:
        self.value += by

    @precondition(lambda self: self.value > 0)
    @rule()
    def halve(self) -> None:
        self.value //= 2

    @invariant(check_during_init=True)
    def during_init(self) -> None:
        self.log.append(("during_init", self.value))

    @precondition(lambda self: self.value % 2 == 0)
    @invariant()
    def even_only(self) -> None:
        self.log.append(("even_only", self.value))

    @invariant()
    def small(self) -> None:
        self.log.append(("small", self.value))
        assert self.fail_at is None or self.value < self.fail_at, f"value {self.value}"


def _machine(lean: bool | None, fail_at: int | None = None) -> type[Counter]:
    return type("Counter", (Counter,), {"lean": lean, "log": [], "fail_at": fail_at})


@pytest.fixture(name="applies")
def shortcut_applies() -> Iterator[None]:
    if not lean_applies():
        pytest.skip("the installed Hypothesis is not the one the shortcut was written against: "
                    "the machines run Hypothesis's own loop")
    yield


def test_the_shortcut_calls_the_invariants_hypothesis_calls(applies: None) -> None:
    lean, plain = _machine(None), _machine(False)
    _run(lean, settings=SETTINGS)
    _run(plain, settings=SETTINGS)
    assert lean.log == plain.log
    assert {entry[0] for entry in lean.log} == {"during_init", "even_only", "small", "times"}


def test_a_failure_prints_the_same_steps_both_ways(applies: None) -> None:
    reports = []
    for lean in (None, False):
        with pytest.raises(AssertionError, match="value") as failure:
            _run(_machine(lean, fail_at=7), settings=SETTINGS)
        reports.append("\n".join(getattr(failure.value, "__notes__", [])))
    assert reports[0] == reports[1]
    assert "state.small()" in reports[0] and "state.during_init()" in reports[0]


def test_an_invariant_that_returns_a_value_fails_the_health_check_both_ways(applies: None) -> None:
    class Returns(LeanInvariants):
        @rule()
        def step(self) -> None:
            pass

        @invariant()
        def answers(self) -> int:
            return 1

    for lean in (None, False):
        with pytest.raises(FailedHealthCheck, match="answers returned 1"):
            _run(type("Returns", (Returns,), {"lean": lean}),
                 settings=settings(SETTINGS, suppress_health_check=[]))


def test_another_hypothesis_source_runs_hypothesiss_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hot, "WRITTEN_AGAINST", "0" * 64)
    monkeypatch.setattr(_hot, "_applies", None)
    calls = []
    own = RuleBasedStateMachine.check_invariants

    def spied(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(type(self).__name__)
        own(self, *args, **kwargs)

    monkeypatch.setattr(RuleBasedStateMachine, "check_invariants", spied)
    machine = _machine(None)
    _run(machine, settings=settings(SETTINGS, max_examples=2))
    assert not lean_applies() and calls and {entry[0] for entry in machine.log} >= {"small", "times"}


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                                                      st.from_regex(r"[A-Za-z0-9_.~-]{1,12}", fullmatch=True)),
                       max_size=4))
def test_the_query_string_is_urlencodes(params: dict[str, Any]) -> None:
    assert query(params) == urlencode({k: v for k, v in params.items() if v is not None})


def test_the_listings_query_strings_take_the_short_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hot, "urlencode", None)  # called, it would raise
    assert query({"project_epoch": "01KDVDNA00DDKKE3Q0QGJ30S24", "after_seq": 0, "limit": 10_000, "x": None}) == (
        "project_epoch=01KDVDNA00DDKKE3Q0QGJ30S24&after_seq=0&limit=10000")
