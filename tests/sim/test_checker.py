"""The checker on small histories whose verdicts are known by hand, against a brute-force
search on random ones, on generated Porcupine-shaped ones, and through ``aidememo-sim check``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import random
from dataclasses import replace
from pathlib import Path

import pytest

from simulations.linearizability.checker import Checker, Model, Verdict, check
from simulations.cli import main
from simulations.linearizability.history import Header, Operation, dump_history
from simulations.linearizability.kv import KV
from simulations.linearizability.register import CAS_REGISTER, Plant, generate_history

ZERO = CAS_REGISTER.with_init(0)
SEARCH_ONLY = replace(ZERO, refute=None)


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


@pytest.mark.parametrize("model", [CAS_REGISTER, replace(CAS_REGISTER, refute=None)], ids=["pre-pass", "search"])
def test_read_of_overwritten_value_after_the_overwrite_is_illegal(model: Model[str]) -> None:
    h = [
        op(2, W(5), {}, 0, 5),
        op(2, R(), {"value": 5}, 6, 8),
        op(0, W(1), {}, 10, 15),
        op(0, W(2), {}, 20, 30),
        op(1, R(), {"value": 1}, 40, 50),
    ]
    result = check(model, h)
    assert result.verdict is Verdict.ILLEGAL
    assert result.violation is not None and result.violation.minimal
    # Whatever the register held before, the write of 2 ended before the read of 1 began: those
    # two are to blame (the pre-pass adds the last write of 1, the value the read claims).
    assert {3, 4} <= set(result.violation.witness) <= {2, 3, 4}
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


def test_time_budget_exhaustion_is_unknown_not_a_guess() -> None:
    h = generate_history(seed=4, operations=3_000, clients=16, keys=1)
    result = check(SEARCH_ONLY, h, budget_s=1e-3, explain_budget_s=0)
    assert result.verdict is Verdict.UNKNOWN and "time" in result.detail


def test_size_budget_exhaustion_is_unknown_not_an_out_of_memory() -> None:
    h = generate_history(seed=4, operations=3_000, clients=16, keys=1)
    result = check(SEARCH_ONLY, h, budget_s=60, explain_budget_s=0, max_configs=50)
    assert result.verdict is Verdict.UNKNOWN and "configurations" in result.detail


# -- initial state (issue 13: Porcupine's registers start at 0) ------------------------------------


def test_a_porcupine_shaped_history_is_linearizable_only_from_its_initial_value() -> None:
    history = generate_history(seed=11, operations=400, clients=8, keys=100)
    assert check(ZERO, history).verdict is Verdict.OK
    # Started at null, the first read of 0 on some key is impossible: the report this fixes.
    result = check(CAS_REGISTER, history)
    assert result.verdict is Verdict.ILLEGAL
    assert result.violation is not None and "started as null" in result.violation.explanation


def test_with_init_rejects_values_the_model_cannot_hold() -> None:
    from simulations.errors import SimulationError

    with pytest.raises(SimulationError, match="string"):
        KV.with_init(3)


# -- the search against brute force --------------------------------------------------------------------


def _brute(model: Model[str], ops: list[Operation]) -> bool:
    """Every order respecting real time; unanswered operations may also never happen."""

    def go(done: frozenset[int], states: frozenset[str]) -> bool:
        if all(i in done or ops[i].output is None for i in range(len(ops))):
            return True
        for i in range(len(ops)):
            if i in done or any(
                    j not in done and ops[j].output is not None and ops[j].return_ns is not None
                    and ops[j].return_ns < ops[i].call_ns for j in range(len(ops))):
                continue
            nxt = frozenset(s2 for s in states for s2 in model.step(s, ops[i].input, ops[i].output))
            if nxt and go(done | {i}, nxt):
                return True
        return False

    return go(frozenset(), frozenset([model.init()]))


def _random_history(rng: random.Random, n: int) -> list[Operation]:
    ops = []
    for client in range(n):
        call = rng.randrange(30)
        kind = rng.choice(["read", "write", "cas"])
        if kind == "read":
            inp, out = R(), {"value": rng.choice([0, 1, 2, None])}
        elif kind == "write":
            inp, out = W(rng.randrange(3)), {}
        else:
            inp, out = CAS(rng.randrange(3), rng.randrange(3)), {"ok": rng.random() < 0.5}
        if rng.random() < 0.15:
            ops.append(op(client, inp, None, call, None))
        else:
            ops.append(op(client, inp, out, call, call + rng.randrange(15)))
    return ops


@pytest.mark.parametrize("seed", range(4))
def test_the_checker_agrees_with_brute_force_on_random_histories(seed: int) -> None:
    rng = random.Random(seed)
    verdicts = {True: 0, False: 0}
    for _ in range(250):
        h = _random_history(rng, rng.randrange(1, 7))
        expected = _brute(ZERO, h)
        verdicts[expected] += 1
        for model in (ZERO, SEARCH_ONLY):
            result = check(model, h, explain_budget_s=0.5)
            assert (result.verdict is Verdict.OK) == expected, (model.refute is None, h)
            violation = result.violation
            if (violation is not None and violation.minimal and model.refute is None
                    and "starting from any state" not in violation.explanation):
                # The witness alone, everything else free to happen any time after its call, is
                # still illegal.
                free = [o if i in violation.witness else op(o.client, o.input, None, o.call_ns, None)
                        for i, o in enumerate(h) if i in violation.witness or o.input["op"] != "read"]
                assert not _brute(ZERO, free), (h, violation.witness)
    assert min(verdicts.values()) > 50  # both verdicts are well represented


def test_the_pre_pass_only_refutes_what_the_search_refutes() -> None:
    rng = random.Random(9)
    refuted = 0
    for _ in range(300):
        h = _random_history(rng, rng.randrange(2, 8))
        refutation = ZERO.refute(h, ZERO.init()) if ZERO.refute else None
        if refutation is not None:
            refuted += 1
            assert check(SEARCH_ONLY, h).verdict is Verdict.ILLEGAL
    assert refuted > 20


def test_incremental_checking_gives_the_same_verdict_as_one_check() -> None:
    rng = random.Random(3)
    for _ in range(100):
        # Batches run one after another, as a campaign's do: each begins after the last ended.
        history: list[Operation] = []
        checker = Checker(SEARCH_ONLY)
        verdict = Verdict.OK
        for _ in range(rng.randrange(1, 5)):
            offset = 1 + max((o.return_ns or o.call_ns for o in history), default=0)
            batch = [op(o.client, o.input, o.output, o.call_ns + offset,
                        None if o.return_ns is None else o.return_ns + offset)
                     for o in _random_history(rng, rng.randrange(1, 4))]
            history += batch
            checker.add(batch)
            verdict = checker.run(explain_budget_s=0).verdict
            if verdict is Verdict.ILLEGAL:
                break
        assert (verdict is Verdict.OK) == (check(SEARCH_ONLY, history).verdict is Verdict.OK)


def test_incremental_checking_feeds_only_the_new_events() -> None:
    first = generate_history(seed=2, operations=1_000, clients=8, keys=1)
    end = max(o.return_ns or 0 for o in first)
    # A write of 0 once the first half is over, then a second half that starts from 0.
    reset = op(0, {"op": "write", "value": 0}, {}, end + 1, end + 2)
    second = [op(o.client, o.input, o.output, o.call_ns + end + 3, (o.return_ns or 0) + end + 3)
              for o in generate_history(seed=3, operations=1_000, clients=8, keys=1)]
    checker = Checker(SEARCH_ONLY)
    checker.add([*first, reset])
    assert checker.run().verdict is Verdict.OK
    part = next(iter(checker._parts.values()))
    assert part.frontier is not None
    before = part.frontier
    checker.add(second)
    assert checker.run().verdict is Verdict.OK
    assert part.frontier is before  # the same search went on, it did not start over


# -- generated histories (bench/sim.py's) -------------------------------------------------------------


@pytest.mark.parametrize("keys", [1, 10])
@pytest.mark.parametrize("plant", [Plant.STALE_READ, Plant.DOUBLE_CAS])
def test_generated_histories_are_ok_and_a_planted_fault_is_found(keys: int, plant: Plant) -> None:
    size = 600 * keys
    clean = generate_history(seed=keys, operations=size, clients=8, keys=keys)
    assert check(ZERO, clean).verdict is Verdict.OK
    bad = generate_history(seed=keys, operations=size, clients=8, keys=keys, plant=plant)
    changed = {i for i, (a, b) in enumerate(zip(clean, bad)) if a != b}
    assert len(changed) == 1
    for model in (ZERO, SEARCH_ONLY):
        result = check(model, bad, explain_budget_s=2.0)
        assert result.verdict is Verdict.ILLEGAL
        assert result.violation is not None and changed <= set(result.violation.witness)


# -- Porcupine's formats ---------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cli_reads_porcupine_operations_and_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A put of 100 overlapping two gets, one seeing 100 and one still 0 (legal) ...
    ops = [{"ClientId": 0, "Input": {"op": "write", "value": 100}, "Call": 0, "Output": None, "Return": 100},
           {"ClientId": 1, "Input": {"op": "read"}, "Call": 25, "Output": {"value": 100}, "Return": 75},
           {"ClientId": 2, "Input": {"op": "read"}, "Call": 30, "Output": {"value": 0}, "Return": 60}]
    good = _write(tmp_path, "ops.json", json.dumps(ops))
    assert main(["check", str(good), "--model", "cas-register", "--init", "0"]) == 0
    # ... but not when the get of 0 starts after the get of 100 ended.
    ops[2]["Call"], ops[2]["Return"] = 80, 90
    bad = _write(tmp_path, "bad.json", json.dumps(ops))
    assert main(["check", str(bad), "--model", "cas-register", "--init", "0"]) == 1
    events = [{"ClientId": 0, "Kind": False, "Value": {"op": "write", "value": 200}, "Id": 0},
              {"ClientId": 1, "Kind": False, "Value": {"op": "read"}, "Id": 1},
              {"ClientId": 1, "Kind": True, "Value": {"value": 200}, "Id": 1},
              {"ClientId": 2, "Kind": "call", "Value": {"op": "read"}, "Id": 2},
              {"ClientId": 2, "Kind": "return", "Value": {"value": 0}, "Id": 2},
              {"ClientId": 0, "Kind": True, "Value": None, "Id": 0}]
    path = _write(tmp_path, "events.jsonl", "\n".join(json.dumps(e) for e in events))
    assert main(["check", str(path), "--model", "cas-register", "--init", "0"]) == 1
    assert "ILLEGAL" in capsys.readouterr().out


def test_cli_reads_jepsen_logs_as_porcupine_does(tmp_path: Path) -> None:
    lines = ["INFO  jepsen.util - 0\t:invoke\t:write\t3", "INFO  jepsen.util - 1\t:invoke\t:read\tnil",
             "INFO  jepsen.core - a line from another logger", "INFO  jepsen.util - 0\t:ok\t:write\t3",
             "INFO  jepsen.util - 1\t:ok\t:read\t3", "INFO  jepsen.util - 2\t:invoke\t:cas\t[3 1]",
             "INFO  jepsen.util - 2\t:info\t:cas\t:timed-out", "INFO  jepsen.util - 0\t:invoke\t:read\tnil",
             "INFO  jepsen.util - 0\t:ok\t:read\t1", "INFO  jepsen.util - 1\t:invoke\t:cas\t[1 4]",
             "INFO  jepsen.util - 1\t:fail\t:cas\t[1 4]"]
    path = _write(tmp_path, "etcd.log", "\n".join(lines) + "\n")
    # The timed-out cas may have happened (the read of 1 says it did); the failed cas of 1 -> 4
    # then says the register no longer held 1, which nothing explains.
    assert main(["check", str(path)]) == 1
    assert main(["check", str(_write(tmp_path, "ok.log", "\n".join(lines[:-2]) + "\n"))]) == 0


def test_cli_reads_jepsen_edn_for_registers_and_kv(tmp_path: Path) -> None:
    kv = ['{:process 0, :type :invoke, :f :append, :key "a", :value "x"}',
          '{:process 0, :type :ok, :f :append, :key "a", :value "x"}',
          '{:process 1, :type :invoke, :f :get, :key "a", :value nil}',
          '{:process 1, :type :ok, :f :get, :key "a", :value "x"}']
    assert main(["check", str(_write(tmp_path, "kv.edn", "\n".join(kv)))]) == 0
    kv[-1] = kv[-1].replace('"x"}', '""}')
    assert main(["check", str(_write(tmp_path, "kv-bad.edn", "\n".join(kv)))]) == 1
    reg = ["{:type :invoke, :f :write, :value 1, :process 0}", "{:type :ok, :f :write, :value 1, :process 0}",
           "{:type :invoke, :f :cas, :value [1 2], :process 1}", "{:type :ok, :f :cas, :value [1 2], :process 1}",
           "{:type :invoke, :f :read, :value nil, :process 0}", "{:type :ok, :f :read, :value 1, :process 0}"]
    assert main(["check", str(_write(tmp_path, "reg.edn", "\n".join(reg)))]) == 1


def test_cli_check_verdicts_init_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad, headed = tmp_path / "good.jsonl", tmp_path / "bad.jsonl", tmp_path / "headed.jsonl"
    with good.open("w") as f:
        dump_history(generate_history(seed=5, operations=300, keys=3), f)
    with bad.open("w") as f:
        dump_history(generate_history(seed=5, operations=300, keys=3, plant=Plant.STALE_READ), f)
    with headed.open("w") as f:
        dump_history(generate_history(seed=5, operations=300, keys=3), f,
                     Header(model="cas-register", init=0, has_init=True))
    assert main(["check", str(good), "--model", "cas-register", "--init", "0"]) == 0
    assert main(["check", str(good), "--model", "cas-register"]) == 1  # from null: the report
    assert main(["check", str(headed)]) == 0  # the file carries its model and initial state
    assert main(["check", str(bad), "--model", "cas-register", "--init", "0", "--html", str(tmp_path / "t.html")]) == 1
    out = capsys.readouterr().out
    assert "ILLEGAL" in out and "impossible" in out
    assert "<svg" in (tmp_path / "t.html").read_text()


@pytest.mark.parametrize(
    "line, extra, message",
    [
        ("not json", [], "not JSON"),
        (json.dumps({"client": 1, "input": {}, "output": {}, "call": 5, "return": 1}), [], "before its call"),
        (json.dumps({"client": "a", "input": {}, "output": {}, "call": 5, "return": 6}), [], "'client'"),
        (json.dumps({"client": 1, "input": {}, "output": {}, "call": 5, "return": 6}), [], "names no model"),
        (json.dumps({"history": "aidememo-sim/1", "init": 0, "colour": 1}), ["--model", "kv"], "unknown header"),
        ("[1, 2]", ["--model", "kv"], "expected a JSON object"),
        ("INFO  jepsen.util - 0\t:invoke\t:cas\t7", [], "a cas takes"),
        ('{:process 0, :type :invoke, :f :get', [], "unclosed"),
        (json.dumps({"client": 1, "input": {}, "output": {}, "call": 5, "return": 6}),
         ["--model", "cas-register", "--init", "zero"], "not a JSON value"),
    ],
)
def test_cli_check_rejects_bad_input_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, extra: list[str], message: str
) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(line + "\n")
    assert main(["check", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_rejects_unknown_model_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope"), "--model", "cas-register"]) == 2
    assert main(["check", str(tmp_path / "nope"), "--model", "zzz"]) == 2
    assert capsys.readouterr().err.count("\n") == 2


def _ledger_op(client: int, actor: str, kind: str, out: dict[str, object], call: int, ret: int,
               **fields: object) -> Operation:
    inp: dict[str, object] = {"op": f"handoff.{kind}", "actor": actor, "handoff_id": "h1",
                              "command_id": f"cmd-{call}", "now_ms": 1_000, **fields}
    if kind == "send":
        inp |= {"payload": {"handoff_id": "h1", "session_id": "s1", "to_actor": "bob"},
                "session": {"source_id": "src"}, "receiver_writable": True}
    return op(client, inp, out, call, ret)


def test_an_explanation_names_the_states_the_recorded_answers_allow_and_the_expected_answer() -> None:
    """Issue 20: the explanation once said 'Before it, the state could be: no handoff ... the model
    would answer 404' while the table above it showed the handoff at revision 2, and never that 409
    stale_revision was expected. It must name the states the recorded history allows."""
    from simulations.ledger import LEDGER

    ok = {"http": 200, "code": None}
    h = [
        _ledger_op(0, "alice", "send", ok | {"revision": 1}, 0, 10),
        _ledger_op(1, "bob", "accept", ok | {"revision": 2}, 20, 30, expected_revision=1,
                   payload={"claim_id": "c1"}),
        _ledger_op(2, "bob", "accept", ok | {"revision": 3}, 40, 50, expected_revision=1,
                   payload={"claim_id": "c2"}),
    ]
    result = check(LEDGER, h)  # type: ignore[arg-type]
    assert result.verdict is Verdict.ILLEGAL and result.violation is not None
    text = result.violation.explanation
    assert text.startswith("#2 (client 2): bob accept h1(rev=1"), text
    assert "rev 2 accepted claim=c1" in text and "409 stale_revision" in text, text
    assert "no handoff" not in text and "404" not in text, text
    assert dict(result.violation.expected) == {2: ("409 stale_revision",)}


def test_cli_check_into_a_reader_that_went_away_exits_quietly(tmp_path: Path) -> None:
    # `aidememo-sim check ... | head`: the pipe's read end is closed before the check writes.
    ops = [{"ClientId": 0, "Input": {"op": "write", "value": 100}, "Call": 0, "Output": None, "Return": 100},
           {"ClientId": 1, "Input": {"op": "read"}, "Call": 25, "Output": {"value": 100}, "Return": 75},
           {"ClientId": 2, "Input": {"op": "read"}, "Call": 80, "Output": {"value": 0}, "Return": 90}]
    bad = _write(tmp_path, "bad.json", json.dumps(ops))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "simulations.cli", "check", str(bad), "--model", "cas-register",
                               "--init", "0"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr
