"""The checker on small histories whose verdicts are known by hand, and on generated ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulations.checker import Verdict, check
from simulations.cli import main
from simulations.history import Operation, dump_history
from simulations.register import CAS_REGISTER, generate_history


def op(client: int, inp: dict[str, object], out: dict[str, object] | None, call: int, ret: int | None) -> Operation:
    return Operation(client=client, input=inp, output=out, call_ns=call, return_ns=ret)


def W(v: object, key: str = "x") -> dict[str, object]:
    return {"op": "write", "key": key, "value": v}


def R(key: str = "x") -> dict[str, object]:
    return {"op": "read", "key": key}


def CAS(e: object, n: object, key: str = "x") -> dict[str, object]:
    return {"op": "cas", "key": key, "expected": e, "new": n}


def test_sequential_write_then_read_is_ok() -> None:
    h = [op(0, W(1), {}, 0, 10), op(1, R(), {"value": 1}, 20, 30)]
    assert check(CAS_REGISTER, h).verdict is Verdict.OK


def test_read_of_overwritten_value_after_the_overwrite_is_illegal() -> None:
    h = [
        op(2, W(5), {}, 0, 5),
        op(2, R(), {"value": 5}, 6, 8),
        op(0, W(1), {}, 10, 15),
        op(0, W(2), {}, 20, 30),
        op(1, R(), {"value": 1}, 40, 50),
    ]
    result = check(CAS_REGISTER, h)
    assert result.verdict is Verdict.ILLEGAL
    assert result.violation is not None and result.violation.minimal
    # The first write and read may take effect any time without changing the verdict; the
    # write of 1 may not: were it free to come after the write of 2, the read would be legal.
    assert result.violation.witness == (2, 3, 4)
    assert "#4 (client 1)" in result.violation.explanation


def test_concurrent_read_may_see_either_value() -> None:
    for seen in (1, 2):
        h = [op(0, W(1), {}, 0, 10), op(0, W(2), {}, 20, 60), op(1, R(), {"value": seen}, 30, 50)]
        assert check(CAS_REGISTER, h).verdict is Verdict.OK


def test_touching_intervals_overlap_because_they_are_closed() -> None:
    h = [op(0, W(2), {}, 10, 20), op(1, R(), {"value": None}, 20, 30)]
    assert check(CAS_REGISTER, h).verdict is Verdict.OK
    h = [op(0, W(2), {}, 10, 20), op(1, R(), {"value": None}, 21, 30)]
    assert check(CAS_REGISTER, h).verdict is Verdict.ILLEGAL


def test_two_successful_cas_from_the_same_value_are_illegal() -> None:
    h = [
        op(0, W(0), {}, 0, 5),
        op(1, CAS(0, 1), {"ok": True}, 10, 50),
        op(2, CAS(0, 2), {"ok": True}, 10, 50),
    ]
    result = check(CAS_REGISTER, h)
    assert result.verdict is Verdict.ILLEGAL
    assert result.violation is not None and {1, 2} <= set(result.violation.witness)


def test_unknown_write_may_or_may_not_have_happened() -> None:
    for seen in (None, 7):
        h = [op(0, W(7), None, 0, None), op(1, R(), {"value": seen}, 10, 20)]
        assert check(CAS_REGISTER, h).verdict is Verdict.OK
    h = [op(0, W(7), None, 0, None), op(1, R(), {"value": 8}, 10, 20)]
    assert check(CAS_REGISTER, h).verdict is Verdict.ILLEGAL


def test_unknown_write_cannot_take_effect_before_its_call() -> None:
    h = [op(1, R(), {"value": 7}, 0, 5), op(0, W(7), None, 10, None)]
    assert check(CAS_REGISTER, h).verdict is Verdict.ILLEGAL


def test_keys_are_independent_partitions() -> None:
    h = [op(0, W(1, "a"), {}, 0, 10), op(1, R("b"), {"value": None}, 20, 30), op(1, R("a"), {"value": 1}, 40, 50)]
    result = check(CAS_REGISTER, h)
    assert result.verdict is Verdict.OK and len(result.partitions) == 2


def test_budget_exhaustion_is_unknown_not_a_guess() -> None:
    # Many concurrent writes with one impossible read at the end force a long search.
    h = [op(c, W(c), {}, 0, 1_000) for c in range(18)] + [op(99, R(), {"value": 1234}, 2_000, 2_001)]
    assert check(CAS_REGISTER, h, budget_s=1e-6, explain_budget_s=0).verdict is Verdict.UNKNOWN


@pytest.mark.parametrize("keys", [1, 10])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_histories_are_ok_and_a_planted_stale_read_is_found(seed: int, keys: int) -> None:
    size = 150 * keys  # a single-key history is the slow one to shrink
    clean = generate_history(seed=seed, operations=size, clients=8, keys=keys)
    assert check(CAS_REGISTER, clean).verdict is Verdict.OK
    stale = generate_history(seed=seed, operations=size, clients=8, keys=keys, stale_read=True)
    result = check(CAS_REGISTER, stale, explain_budget_s=1.0)
    assert result.verdict is Verdict.ILLEGAL
    changed = [i for i, (a, b) in enumerate(zip(clean, stale)) if a != b]
    assert result.violation is not None and set(changed) <= set(result.violation.witness)


def test_cli_check_verdicts_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    with good.open("w") as f:
        dump_history(generate_history(seed=5, operations=200, keys=3), f)
    with bad.open("w") as f:
        dump_history(generate_history(seed=5, operations=200, keys=3, stale_read=True), f)
    assert main(["check", str(good), "--model", "cas-register"]) == 0
    assert main(["check", str(bad), "--model", "cas-register", "--html", str(tmp_path / "t.html")]) == 1
    out = capsys.readouterr().out
    assert "ILLEGAL" in out and "cannot be ordered" in out
    assert "<svg" in (tmp_path / "t.html").read_text() or "lane" in (tmp_path / "t.html").read_text()


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not JSON"),
        (json.dumps({"client": 1, "input": {}, "output": {}, "call": 5, "return": 1}), "before its call"),
        (json.dumps({"client": "a", "input": {}, "output": {}, "call": 5, "return": 6}), "'client'"),
    ],
)
def test_cli_check_rejects_bad_history_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(line + "\n")
    assert main(["check", str(path), "--model", "cas-register"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_rejects_unknown_model_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope"), "--model", "cas-register"]) == 2
    assert main(["check", str(tmp_path / "nope"), "--model", "zzz"]) == 2
    assert capsys.readouterr().err.count("\n") == 2
