"""What a checker model is, in Porcupine's shape, and what a check answers.

A ``Model`` is an initial state, a pure ``step`` that returns every possible next state (none:
refused), and optional parts that make checking faster or clearer: a per-operation partition
key, which operations never change the state, a specialised step per operation, a sound
pre-pass, the universe of states, a settable initial state, and plain-text descriptions. The
verdicts are three: OK, ILLEGAL, and UNKNOWN when a budget ran out.

This module holds types only; ``checker.py`` checks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Generic, TypeVar

from simulations.errors import SimulationError
from simulations.linearizability.history import Operation

__all__ = ["CheckResult", "Guarded", "Input", "Model", "Output", "PartitionResult", "Refutation", "StepFn", "Update",
           "Verdict"]

S = TypeVar("S", bound=Hashable)

Input = Mapping[str, object]
Output = Mapping[str, object] | None
StepFn = Callable[[S], Sequence[S]]



def _describe_operation(op_input: Input, output: Output) -> str:
    return f"{dict(op_input)} -> {'?' if output is None else dict(output)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Refutation:
    """A model's own proof that a partition is illegal: the operations it rests on, and why."""

    witness: tuple[int, ...]  # indices into the partition given to ``refute``
    explanation: str


class Update(Enum):
    """What a guarded step does besides moving to a given state."""

    KEEP = "keep"  # the state stays as it is
    REFUSE = "refuse"  # no next state: the model refuses the output


@dataclass(frozen=True, slots=True)
class Guarded(Generic[S]):
    """A deterministic step as a guarded update: in state ``guard`` the next state is ``equal``,
    in every other it is ``other`` (``guard`` None: no state is the guard, so states must never be
    None). The compiled kernel steps such rules without calling back into Python."""

    guard: S | None
    equal: S | Update
    other: S | Update


@dataclass(frozen=True, slots=True, kw_only=True)
class Model(Generic[S]):
    """An executable specification in Porcupine's shape.

    Attributes:
        name: registry name, e.g. ``cas-register``.
        init: the initial state.
        step: every state the model may be in after ``(state, input, output)``; an empty result
            means the model refuses that output. ``output is None`` (unknown) must allow at least
            one state, because an unanswered request may always be placed last.
        partition: the key of the independent part an input belongs to (e.g. its register).
        effect_free: true when an operation with this input and output never changes the state
            (a read; a refused write). Such operations are applied as soon as they are legal,
            and dropped when their output is unknown.
        compile: ``step`` specialised to one operation (``state -> next states``), for speed.
        refute: a sound pre-pass ``(partition, initial state) -> Refutation | None``.
        universe: every state a partition could reach (a superset is fine), so a window of the
            history can be checked "from any state"; None: the states the search found.
        initial: the state for a user-given initial value (``--init``); None: not settable.
        describe_operation, describe_state: plain text for explanations and timelines.
        describe_expected: what the model would answer in a state, to say why an output is wrong.
        rule: ``step`` as a ``Guarded`` update, when it is one (None: not expressible), so that
            the compiled kernel can search without calling back; it must agree with ``step``.
        key_field: the input field that alone decides ``partition`` and that ``step``,
            ``effect_free``, ``compile`` and ``rule`` ignore, so that a reader may split it off.
    """

    name: str
    init: Callable[[], S]
    step: Callable[[S, Input, Output], Iterable[S]]
    partition: Callable[[Input], Hashable] | None = None
    effect_free: Callable[[Input, Output], bool] | None = None
    compile: Callable[[Input, Output], StepFn[S]] | None = None
    refute: Callable[[Sequence[Operation], S], Refutation | None] | None = None
    universe: Callable[[Sequence[Operation], S], Collection[S]] | None = None
    initial: Callable[[object], S] | None = None
    describe_operation: Callable[[Input, Output], str] = _describe_operation
    describe_state: Callable[[S], str] = repr
    describe_expected: Callable[[S, Input], str] | None = None
    rule: Callable[[Input, Output], Guarded[S] | None] | None = None
    key_field: str | None = None

    def with_init(self, value: object) -> Model[S]:
        """The same model starting from ``value`` (as the history file or ``--init`` gives it).

        Raises:
            SimulationError: when the model has no settable initial state or refuses the value.
        """
        if self.initial is None:
            raise SimulationError(f"model '{self.name}' has no settable initial state")
        state = self.initial(value)
        return replace(self, init=lambda: state)

    def compiled(self, op: Operation) -> StepFn[S]:
        if self.compile is not None:
            return self.compile(op.input, op.output)
        step, inp, out = self.step, op.input, op.output
        return lambda state: tuple(step(state, inp, out))

    def inert(self, op: Operation) -> bool:
        return self.effect_free is not None and self.effect_free(op.input, op.output)


class Verdict(StrEnum):
    OK = "ok"
    ILLEGAL = "illegal"
    UNKNOWN = "unknown"  # the budget ran out before the search did


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    """The verdict on one independent part; indices refer to the checked history."""

    verdict: Verdict
    operations: tuple[int, ...]
    witness: tuple[int, ...] = ()
    minimal: bool = False  # False when the shrinking budget ran out first
    explanation: str = ""
    # (operation, what the model would have answered it in each state it could take effect in)
    expected: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    verdict: Verdict
    model: str
    partitions: tuple[PartitionResult, ...]
    operations: int
    detail: str = ""  # for UNKNOWN: which budget ran out

    @property
    def violation(self) -> PartitionResult | None:
        return next((p for p in self.partitions if p.verdict is Verdict.ILLEGAL), None)

    def summary(self) -> str:
        counts = {v: sum(p.verdict is v for p in self.partitions) for v in Verdict}
        text = (
            f"{self.verdict.value.upper()}: {self.operations} operations, "
            f"{len(self.partitions)} partitions checked against model '{self.model}' "
            f"({counts[Verdict.OK]} ok, {counts[Verdict.ILLEGAL]} illegal, "
            f"{counts[Verdict.UNKNOWN]} unknown)"
        )
        return text + (f"; {self.detail}" if self.detail else "")
