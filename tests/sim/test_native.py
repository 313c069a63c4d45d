"""The compiled kernel (``simulations/linearizability/_native.c``) against the pure path it accelerates.

Every comparison runs both: the pure path by taking the kernel away (``native._NATIVE = None``,
what an install without a C compiler, or ``AIDEMEMO_SIM_PURE=1``, gets). Verdicts, failing
operations, witnesses and explanations must be identical; small histories also go to brute force.
Without the kernel these tests skip, except in CI (``CI`` set), where they fail: CI builds it.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulations.linearizability import native
from simulations.linearizability.checker import Update, Verdict, check
from simulations.errors import SimulationError
from simulations.linearizability.history import Header, Operation, dump_history, parse_history
from simulations.linearizability.porcupine import load
from simulations.linearizability.register import CAS_REGISTER, Plant, generate_history
from simulations.linearizability.search import OutOfBudget, feed, linearizable, prepare, Frontier

from .test_checker import _brute

ZERO = CAS_REGISTER.with_init(0)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def kernel() -> None:
    if not native.available():
        if os.environ.get("CI"):
            pytest.fail("the compiled kernel is not built; CI builds it (pip install -e . with a C compiler)")
        pytest.skip("the compiled kernel is not built (no C compiler at install time)")


def pure(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``fn`` on the pure path: the kernel taken away for the call."""
    kept = native._NATIVE
    native._NATIVE = None
    try:
        return fn(*args, **kwargs)
    finally:
        native._NATIVE = kept


# -- random register histories ------------------------------------------------------------------------

VALUES = st.sampled_from([0, 1, 2, None, "a"])


@st.composite
def histories(draw: st.DrawFn, max_ops: int = 9, keys: int = 2) -> list[Operation]:
    ops = []
    for client in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(["read", "write", "cas", "cas", "bogus"]))
        inp: dict[str, object] = {"op": kind}
        out: dict[str, object]
        if kind == "read":
            out = {"value": draw(VALUES)}
        elif kind == "write":
            inp["value"], out = draw(VALUES), {}
        elif kind == "cas":
            inp["expected"], inp["new"], out = draw(VALUES), draw(VALUES), {"ok": draw(st.booleans())}
        else:
            out = {}
        if keys > 1:
            inp["key"] = f"k{draw(st.integers(0, keys - 1))}"
        call = draw(st.integers(0, 30))
        if draw(st.integers(0, 6)) == 0:
            ops.append(Operation(client=client, input=inp, output=None, call_ns=call, return_ns=None))
        else:
            ops.append(Operation(client=client, input=inp, output=out, call_ns=call,
                                 return_ns=call + draw(st.integers(0, 15))))
    return ops


def _same_result(history: list[Operation]) -> None:
    fast = check(ZERO, history, budget_s=60, explain_budget_s=30)
    slow = pure(check, ZERO, history, budget_s=60, explain_budget_s=30)
    assert fast == slow


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_the_kernel_gives_the_pure_paths_results(history: list[Operation]) -> None:
    _same_result(history)


@settings(max_examples=300, deadline=None)
@given(histories(max_ops=7, keys=1))
def test_both_paths_agree_with_brute_force(history: list[Operation]) -> None:
    model = CAS_REGISTER.with_init(0)
    expected = _brute(model, history)
    assert (check(model, history, budget_s=60, explain_budget_s=0).verdict is Verdict.OK) == expected
    assert (pure(check, model, history, budget_s=60, explain_budget_s=0).verdict is Verdict.OK) == expected


@settings(max_examples=300, deadline=None)
@given(histories(max_ops=12, keys=1), st.sampled_from([None, 5, 12, 20]))
def test_the_kernel_fails_at_the_same_return_as_the_frontier(history: list[Operation], until: int | None) -> None:
    """Not only the verdict: the operation whose return no configuration survived, and where
    (the witness and the incremental checker start from there)."""
    model = ZERO
    deadline = time.monotonic() + 60
    prepared = prepare(model, history, until)
    frontier = Frontier([model.init()], deadline=deadline, max_configs=10**6)
    pos, failed = feed(frontier, prepared, prepared.events)
    outcome = native.search_operations(model, history, [model.init()], deadline=deadline, max_configs=10**6,
                                       until=until)
    assert outcome is not None
    assert (outcome.status, outcome.failed if failed is not None else None) == (
        native.Outcome.OK if failed is None else native.Outcome.ILLEGAL, failed)
    if failed is not None:
        assert outcome.pos == pos


def _op(client: int, inp: dict[str, object], out: dict[str, object] | None, call: int, ret: int | None) -> Operation:
    return Operation(client=client, input=inp, output=out, call_ns=call, return_ns=ret)


def test_of_interchangeable_writes_the_one_due_first_is_applied_first() -> None:
    """Two open writes of 1: the read of 1 that returns at 10 must use the one due at 30, so that
    the one due at 100 is left for the read of 1 after the write of 2. (Taking the one called
    first instead, as a kernel ordering them by call would, finds this history ILLEGAL.)"""
    history = [_op(0, {"op": "write", "value": 1}, {}, 0, 100), _op(1, {"op": "write", "value": 1}, {}, 1, 30),
               _op(2, {"op": "read"}, {"value": 1}, 5, 10), _op(3, {"op": "write", "value": 2}, {}, 2, 50),
               _op(4, {"op": "read"}, {"value": 2}, 40, 45), _op(5, {"op": "read"}, {"value": 1}, 60, 70)]
    outcome = native.search_operations(ZERO, history, ["0"], deadline=time.monotonic() + 60, max_configs=10**6)
    assert outcome is not None and outcome.status == native.Outcome.OK
    _same_result(history)


def test_of_interchangeable_operations_due_together_the_one_returned_first_is_applied_first() -> None:
    """Two successful cas 0 -> 1 both return at 35 (the one fed first: #3, then #4): no order
    explains both, and the frontier fails at #4's return. Applied before the write of 1 returns
    at 32, the one whose return is fed first must be #3 (taking #4, called earlier, would fail
    at #3's return instead)."""
    cas: dict[str, object] = {"op": "cas", "expected": 0, "new": 1}
    history = [_op(0, {"op": "read"}, {"value": 0}, 9, 31), _op(1, {"op": "write", "value": 1}, {}, 15, 32),
               _op(2, {"op": "read"}, {"value": 0}, 17, 23), _op(3, cas, {"ok": True}, 21, 35),
               _op(4, cas, {"ok": True}, 15, 35), _op(5, {"op": "write", "value": 1}, {}, 35, 35)]
    prepared = prepare(ZERO, history)
    pos, failed = feed(Frontier(["0"], deadline=time.monotonic() + 60, max_configs=10**6), prepared, prepared.events)
    assert failed == 4
    outcome = native.search_operations(ZERO, history, ["0"], deadline=time.monotonic() + 60, max_configs=10**6)
    assert outcome is not None and (outcome.status, outcome.failed, outcome.pos) == (native.Outcome.ILLEGAL, 4, pos)


def _few_values(rng: random.Random) -> tuple[list[Operation], int | None]:
    values = rng.choice([1, 2, 2, 3])
    ops = []
    for client in range(rng.randrange(1, 16)):
        kind = rng.choice(["read", "write", "write", "cas", "cas"])
        inp: dict[str, object] = {"op": kind}
        if kind == "read":
            out: dict[str, object] = {"value": rng.randrange(values)}
        elif kind == "write":
            inp["value"], out = rng.randrange(values), {}
        else:
            inp["expected"], inp["new"], out = rng.randrange(values), rng.randrange(values), {"ok": rng.random() < 0.6}
        call = rng.randrange(20)  # a short span: many calls and returns at the same time
        unknown = rng.random() < 0.15
        ops.append(_op(client, inp, None if unknown else out, call, None if unknown else call + rng.randrange(12)))
    return ops, rng.choice([None, None, 5, 10, 15])


def test_histories_over_few_values_fail_at_the_frontiers_return() -> None:
    """Over one to three values many open operations are interchangeable (the same rule), and
    many configurations differ only in what they applied: the kernel keeps fewer of them than
    the pure frontier does (the better of two, the one due first of interchangeable ones), and
    must still fail at the same return, or not at all. Each rule broken fails some of these."""
    rng = random.Random(1)
    for _ in range(4_000):
        history, until = _few_values(rng)
        deadline = time.monotonic() + 60
        prepared = prepare(ZERO, history, until)
        pos, failed = feed(Frontier(["0"], deadline=deadline, max_configs=10**6), prepared, prepared.events)
        outcome = native.search_operations(ZERO, history, ["0"], deadline=deadline, max_configs=10**6, until=until)
        assert outcome is not None
        expected = (native.Outcome.OK, None, pos) if failed is None else (native.Outcome.ILLEGAL, failed, pos)
        got = (outcome.status, None if failed is None else outcome.failed, pos if failed is None else outcome.pos)
        assert got == expected, (history, until)


@pytest.mark.parametrize(("keys", "plant"), [(1, None), (1, Plant.STALE_READ), (1, Plant.DOUBLE_CAS),
                                             (8, None), (8, Plant.DOUBLE_CAS)])
def test_porcupine_shaped_histories_give_the_same_results(keys: int, plant: Plant | None) -> None:
    history = generate_history(seed=3, operations=1_500, clients=6, keys=keys, plant=plant)
    _same_result(history)


def test_the_model_may_start_from_many_states_and_the_witness_is_the_same() -> None:
    # windows "from any state": the witness shrinker's searches, each through the kernel
    history = generate_history(seed=5, operations=400, clients=8, keys=1, plant=Plant.DOUBLE_CAS)
    result = check(ZERO, history, budget_s=60, explain_budget_s=30)
    assert result.verdict is Verdict.ILLEGAL and "starting from any state" in result.violation.explanation  # type: ignore[union-attr]
    _same_result(history)


def test_more_than_64_open_operations_fall_back_to_the_pure_path() -> None:
    reads = [Operation(client=c, input={"op": "read"}, output={"value": 0}, call_ns=c, return_ns=100 + c)
             for c in range(70)]
    writes = reads + [Operation(client=70, input={"op": "write", "value": 1}, output={}, call_ns=5, return_ns=300)]
    stale = Operation(client=99, input={"op": "read"}, output={"value": 7}, call_ns=200, return_ns=210)
    assert native.search_operations(ZERO, writes, ["0"], deadline=time.monotonic() + 5,
                                    max_configs=10**6).status == native.Outcome.TOO_WIDE  # type: ignore[union-attr]
    for history, verdict in ((writes, Verdict.OK), (writes + [stale], Verdict.ILLEGAL)):
        assert check(ZERO, history, budget_s=60, explain_budget_s=0).verdict is verdict
        _same_result(history)


def test_the_kernels_budgets_give_unknown_not_a_guess() -> None:
    history = generate_history(seed=1, operations=3_000, clients=16, keys=1)
    with pytest.raises(OutOfBudget) as late:
        linearizable(ZERO, history, ["0"], time.monotonic() - 1, 10**6)
    assert late.value.why == "time"
    with pytest.raises(OutOfBudget) as small:
        linearizable(ZERO, history, ["0"], time.monotonic() + 60, 1)
    assert small.value.why == "size"
    assert check(ZERO, history, budget_s=60, max_configs=1).verdict is Verdict.UNKNOWN


# -- the register's rule is its step ------------------------------------------------------------------


@given(st.sampled_from(["read", "write", "cas", "other"]), VALUES, VALUES, st.booleans(), st.booleans(), VALUES)
def test_the_registers_rule_is_its_step(kind: str, a: object, b: object, ok: bool, unknown: bool,
                                        state_value: object) -> None:
    inp: dict[str, object] = {"op": kind, "value": a, "expected": a, "new": b}
    out: dict[str, object] | None = None if unknown else {"value": b, "ok": ok}
    state = json.dumps(state_value)
    rule = CAS_REGISTER.rule(inp, out)  # type: ignore[misc]
    assert rule is not None
    target = rule.equal if state == rule.guard else rule.other
    stepped = () if target is Update.REFUSE else ((state,) if target is Update.KEEP else (target,))
    assert tuple(CAS_REGISTER.step(state, inp, out)) == stepped


# -- the scanner reads what the pure reader reads, or declines ----------------------------------------


@st.composite
def history_texts(draw: st.DrawFn) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append(json.dumps({"history": "aidememo-sim/1", "model": "cas-register", "init": draw(VALUES)}))
    space = st.sampled_from(["", " ", "\t", "  "])
    for op in draw(histories(max_ops=6, keys=3)):
        doc = op.to_json()
        if draw(st.booleans()):
            doc["input"] = dict(reversed(list(doc["input"].items())))  # type: ignore[union-attr]
        if draw(st.integers(0, 5)) == 0:
            doc["extra"] = draw(st.sampled_from([[1, {"x": "y"}], "s\\u00e9", 1.5, True]))
        if draw(st.integers(0, 8)) == 0 and doc["return"] is not None:
            del doc["output"]
        items = list(doc.items())
        if draw(st.booleans()):
            items.reverse()
        sep = draw(space)
        text = "{" + sep + ("," + sep).join(f'{json.dumps(k)}{draw(space)}:{draw(space)}{json.dumps(v)}'
                                            for k, v in items) + draw(space) + "}"
        if draw(st.integers(0, 9)) == 0:  # damaged: a character dropped, doubled or replaced
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + draw(st.sampled_from(["", text[at] * 2, "x", "1.0", "\\u", '"', "NaN"])) + text[at + 1:]
        lines.append(draw(space) + text + draw(space))
        if draw(st.integers(0, 6)) == 0:
            lines.append(draw(space))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


def _pure_read(text: str) -> tuple[Header, list[Operation]] | str:
    try:
        return parse_history(text.splitlines())
    except SimulationError as exc:
        return str(exc)


@settings(max_examples=600, deadline=None)
@given(history_texts(), st.sampled_from([1 << 30, 0]))
def test_the_scanner_reads_exactly_what_the_pure_reader_reads(text: str, min_split: int) -> None:
    """Whole, or (min_split 0) in two halves on two threads, as large files are read."""
    expected = _pure_read(text)
    found = native.scan(text.encode(), min_split=min_split)
    if found is None:
        return  # declined: the pure reader reads it (or names the wrong line)
    assert not isinstance(expected, str), f"the scanner read what the pure reader refuses: {expected}"
    header_line, scanned = found
    header, ops = expected
    assert list(scanned) == ops
    assert (header_line is not None) == (header != Header() or '"history"' in text.split("\n", 1)[0])


def test_the_scanner_reads_the_kits_own_files_and_declines_the_rest() -> None:
    buf = io.StringIO()
    history = generate_history(seed=2, operations=300, clients=4, keys=3)
    dump_history(history, buf, Header(model="cas-register", init=0, has_init=True))
    for min_split in (1 << 30, 0, 1000):
        found = native.scan(buf.getvalue().encode(), min_split=min_split)
        assert found is not None and list(found[1]) == history and found[0] is not None
    for declined in ('{"client": 0, "input": {}, "output": {}, "call": 1.0, "return": 2}',  # not an integer
                     '{"client": 0, "input": {}, "output": {"v": "\u00e9"}, "call": 1, "return": 2}',  # not ASCII
                     '{"client": 0, "input": {}, "output": {}, "call": 1, "return": 2}\r\n',  # a '\r' line end
                     '{"client": true, "input": {}, "output": {}, "call": 1, "return": 2}',  # not an integer
                     '{"client": 0, "input": {}, "output": {}, "call": 3, "return": 2}'):  # returns first
        assert native.scan(declined.encode()) is None, declined


def _porcupine_files(tmp: Path) -> Iterator[Path]:
    for keys, plant in ((1, None), (1, Plant.DOUBLE_CAS), (5, Plant.STALE_READ), (5, None)):
        path = tmp / f"h-{keys}-{plant}.jsonl"
        with path.open("w") as out:
            dump_history(generate_history(seed=4, operations=1_200, clients=8, keys=keys, plant=plant), out,
                         Header(model="cas-register", init=0, has_init=True))
        yield path


def test_load_gives_the_pure_readers_history(tmp_path: Path) -> None:
    for path in _porcupine_files(tmp_path):
        header, history = load(path, "auto")
        assert isinstance(history, native.ScannedHistory)
        assert (header, list(history)) == pure(load, path, "auto")


def test_the_command_prints_the_same_with_and_without_the_kernel(tmp_path: Path) -> None:
    """``aidememo-sim check`` as a user runs it, twice each way: same output, same exit code."""
    for path in _porcupine_files(tmp_path):
        runs = []
        for env in ({}, {"AIDEMEMO_SIM_PURE": "1"}) * 2:
            done = subprocess.run([sys.executable, "-m", "simulations.cli", "check", str(path)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=300, env={**os.environ, **env})
            runs.append((done.returncode, done.stdout, done.stderr))
        assert runs[0][0] in (0, 1) and len(set(runs)) == 1, (path, runs)


def test_a_linearizable_file_is_checked_without_building_its_operations(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel searches a scanned partition first: one found linearizable never has its
    operations built for the model's pre-pass (a million of them took 200 MB and most of the
    time). One that is not still gets the pre-pass's proof (the command test above)."""
    path = next(_porcupine_files(tmp_path))  # 1,200 operations on one key: the pre-pass's size
    header, history = load(path, "auto")
    assert isinstance(history, native.ScannedHistory)
    built: list[object] = []
    getitem = native.ScannedHistory.__getitem__

    def counted(self: native.ScannedHistory, i: int) -> object:
        built.append(i)
        return getitem(self, i)

    monkeypatch.setattr(native.ScannedHistory, "__getitem__", counted)
    assert check(ZERO, history, budget_s=60).verdict is Verdict.OK
    assert built == []


def test_a_search_out_of_room_still_gets_the_pre_pass_proof() -> None:
    """With one configuration allowed the kernel's search runs out of room long before the
    planted stale read; the pre-pass, tried then, proves it ILLEGAL, as it does when it runs
    first (the pure path)."""
    history = generate_history(seed=1, operations=3_000, clients=16, keys=1, plant=Plant.STALE_READ)
    outcome = native.search_operations(ZERO, history, ["0"], deadline=time.monotonic() + 60, max_configs=1)
    assert outcome is not None and outcome.status == native.Outcome.OUT_OF_ROOM
    fast = check(ZERO, history, budget_s=60, explain_budget_s=30, max_configs=1)
    assert fast.verdict is Verdict.ILLEGAL
    assert fast == pure(check, ZERO, history, budget_s=60, explain_budget_s=30, max_configs=1)


def test_the_pure_path_is_what_aidememo_sim_pure_gives() -> None:
    code = "from simulations.linearizability import native; print(native.available())"
    for env, expected in (({}, "True"), ({"AIDEMEMO_SIM_PURE": "1"}, "False")):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                              env={**os.environ, **env})
        assert done.stdout.strip() == expected


def test_random_seeds_of_longer_histories_agree(tmp_path: Path) -> None:
    rng = random.Random(11)
    for _ in range(6):
        history = generate_history(seed=rng.randrange(1000), operations=rng.randrange(200, 600),
                                   clients=rng.randrange(2, 10), keys=rng.randrange(1, 4),
                                   plant=rng.choice([None, Plant.STALE_READ]))
        _same_result(history)


class _Alarm(Exception):
    pass


def _raise_alarm(signum: int, frame: object) -> None:
    raise _Alarm


def test_a_long_kernel_search_still_hears_signals() -> None:
    """Ctrl-C during a search of many seconds: the handler's exception ends the kernel's call, it
    is not held back until the search is over. (A profile hook tells the two apart: the call
    raises, instead of returning and the handler running after it.)"""
    import signal

    # 24 clients: a search of seconds (16 take the kernel under 0.2 s, the alarm's delay)
    encoded = native.encode_operations(ZERO, generate_history(seed=1, operations=30_000, clients=24, keys=1))
    assert encoded is not None
    enc, calls, rets, kinds = encoded
    ends: list[str] = []

    def watch(frame: object, event: str, arg: object) -> None:
        if event in ("c_return", "c_exception") and getattr(arg, "__name__", "") == "search":
            ends.append(event)

    previous = signal.signal(signal.SIGALRM, _raise_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        sys.setprofile(watch)
        with pytest.raises(_Alarm):
            enc.search(calls, rets, kinds, ["0"], deadline=time.monotonic() + 600, max_configs=10**7)
    finally:
        sys.setprofile(None)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert ends == ["c_exception"]
