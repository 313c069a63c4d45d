"""The kit's parsers of server answers and of the files it reads, fuzzed: a result or their own error.

Every parser here meets bytes someone else wrote: a server's answer (a body, a header) or a
history, replay or case file. Each gets hostile input drawn by Hypothesis (nesting past the
interpreter's recursion limit, wrong types, odd sizes, invalid UTF-8, CR and LF in headers) and
must give a value or its documented error (``ValueError``, ``ShapeError``, ``SimulationError``,
None), never a ``RecursionError``, ``TypeError`` or any other crash of the kit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conformance.answers import parse
from conformance.errors import ShapeError
from conformance.profiles.aidememo.diff.compare import Normalizer
from conformance.profiles.aidememo.diff.runner import read_case
from refkit.jsonvalue import MAX_DEPTH, loads
from simulations.errors import SimulationError
from simulations.linearizability.porcupine import load as load_history
from simulations.replay import load_replay
from simulations.targets import Reply

DEEP = b"[" * 10_000 + b"]" * 10_000
DEEP_OBJECT = b'{"a":' * 10_000 + b"1" + b"}" * 10_000

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=30)


@st.composite
def nested(draw: st.DrawFn) -> bytes:
    """JSON nested anywhere from shallow to far past the recursion limit, arrays and objects mixed."""
    depth = draw(st.integers(0, 12_000))
    opener = draw(st.sampled_from([(b"[", b"]"), (b'{"k":', b"}")]))
    return opener[0] * depth + b"0" + opener[1] * depth


answer_bodies = (nested() | st.binary(max_size=300)
                 | json_values.map(lambda v: json.dumps(v).encode())
                 | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass")))

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(answer_bodies)
@example(DEEP)
@example(DEEP_OBJECT)
@example(b'{"a": "\xff\xfe"}')
def test_the_bounded_loader_gives_a_value_or_a_value_error(body: bytes) -> None:
    try:
        value = loads(body)
    except ValueError:
        return
    stack = [(value, 1)]
    while stack:  # what it returns is no deeper than it promises
        item, depth = stack.pop()
        assert depth <= MAX_DEPTH + 1
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _nests_too_deep(value: object, max_depth: int) -> bool:
    """The bound by its definition: a container at depth ``max_depth`` or deeper holds something."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if children and depth >= max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


@FUZZ
@given(json_values, st.integers(1, 5))
@example([[[]]], 3)
@example([[[0]]], 3)
def test_the_bounded_loader_refuses_exactly_what_nests_too_deep(value: object, max_depth: int) -> None:
    body = json.dumps(value).encode()
    try:
        loads(body, max_depth=max_depth)
    except ValueError:
        assert _nests_too_deep(value, max_depth), f"refused {body!r} at max_depth {max_depth}"
    else:
        assert not _nests_too_deep(value, max_depth), f"read {body!r} at max_depth {max_depth}"


@FUZZ
@given(answer_bodies)
@example(DEEP)
def test_an_answer_is_read_or_departs(body: bytes) -> None:
    try:
        parse(body, "GET /x answered 200")
    except ShapeError:
        pass
    assert Reply(200, body).json() is None or isinstance(Reply(200, body).json(), (dict, list, str, int, float, bool))


header_text = st.text(alphabet=st.characters(codec="latin-1"), max_size=30)


@FUZZ
@given(st.integers(0, 999), st.lists(st.tuples(header_text, header_text), max_size=4), answer_bodies)
@example(200, [("content-type", "application/json\r")], DEEP)
@example(200, [("allow", "GET,\rPOST")], b'{"project_epoch": 1}')
@example(200, [], json.dumps({"note": "[" * 5000}).encode())
def test_diff_normalizes_any_answer(status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    answer = Normalizer(names={"p-x": "$project"}, namespace="x").answer(status, headers, body)
    json.dumps(answer.to_dict())  # what goes into diff.json


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


file_bodies = (nested() | st.binary(max_size=300)
               | st.fixed_dictionaries({"format": st.sampled_from(["aidememo-sim-replay/1", "x"]), "seed": scalars,
                                        "target": json_values, "plan": json_values, "schedule": json_values,
                                        "version": st.just(1), "steps": json_values}).map(
                   lambda d: json.dumps(d).encode()))


@FUZZ
@given(file_bodies)
@example(DEEP)
def test_a_replay_file_is_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = _file(tmp_path_factory.mktemp("replay"), "race.json", data)
    try:
        load_replay(path)
    except SimulationError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(file_bodies)
@example(DEEP)
def test_a_case_file_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = _file(tmp_path_factory.mktemp("case"), "case.json", data)
    try:
        read_case(path)
    except ValueError:
        pass


history_lines = st.lists(answer_bodies | json_values.map(lambda v: json.dumps(v).encode()), max_size=4)


@FUZZ
@given(history_lines, st.sampled_from(["auto", "jsonl", "porcupine"]))
@example([b'{"format": "aidememo-sim-history/1", "model": "ledger"}', DEEP], "auto")
@example([DEEP], "porcupine")
def test_a_history_file_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes],
                                           fmt: str) -> None:
    path = _file(tmp_path_factory.mktemp("history"), "history.jsonl", b"\n".join(lines))
    try:
        load_history(path, fmt)
    except SimulationError as exc:
        assert "\n" not in str(exc)
