"""The request path's shortcuts against the general code they stand for.

``raw_command`` decodes the common body in one pass (``_hot.plain_raw``) and leaves everything
else to the struct decoder; ``_hot.build`` makes a record as its constructor does; a field
kind's quick test passes only what the field decoder keeps as it is; the log's ``INSERT`` names
only a row's non-None fields (``_hot.AppendStatements``); the canonical encoder skips its float
walk when the text shows no float; the envelope digest writes checked ids between quotes
unescaped; ``Service`` answers exact paths without parsing them; receipts are formatted in one
step. Each test here compares a shortcut with the general code (or with the canonical form it
must equal) on the inputs where they could part.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidememo_ref import ReferenceLedger
from aidememo_wire.canonical import Json, _encode, canonical_json, envelope_digest, fingerprint, parse_json
from aidememo_ref._commands import STRUCTS, RawCommand, _decoded_raw, raw_command
from aidememo_ref._decode import Field, _field_value
from aidememo_ref._hot import AppendStatements, build, plain_raw, quick_test
from aidememo_ref._logstate import Row
from aidememo_ref._sqlite import append_statement
from aidememo_wire.errors import LedgerError
from aidememo_ref._records import Receipt

BASE: dict[str, Json] = {
    "command_id": "cmd-1", "project_id": "p", "expected_revision": None, "operation": "resource.put",
    "payload": {"i": 1, "text": "bench"}, "resource": {"kind": "custom.note", "id": "n1"}, "change": "upsert",
}
# Values each field is tried with: valid and invalid for every field kind, JSON's every type,
# the bounds of each grammar and of u64.
VALUES: list[Json] = [
    None, True, False, 0, 1, 7, -1, (1 << 64) - 1, 1 << 64, 1.5, -0.0, "", "a", "A", "n1", "custom.note",
    "resource.put", "resource.delete", "upsert", "delete", "Upsert", "x" * 96, "x" * 97, "x" * 128, "x" * 129,
    "é", "a b", "a\"b", "a/b", "p@x:y.z-1_2", [], ["custom.note", "n1"], ["custom.note"], {},
    {"kind": "custom.note", "id": "n1"}, {"kind": "custom.note", "id": "n1", "extra": 1}, {"kind": "custom.note"},
]
FIELDS = [*BASE, "resource.kind", "resource.id"]


def _outcome(decode: object, body: Json) -> RawCommand | str:
    try:
        result = decode(body)  # type: ignore[operator]
    except LedgerError as error:
        return f"{error.status} {error.code.value}: {error.message}"
    assert isinstance(result, RawCommand)
    return result


def _mutated(field: str, value: Json | type[KeyError]) -> dict[str, Json]:
    body = copy.deepcopy(BASE)
    target: dict[str, Json] = body
    if field.startswith("resource."):
        resource = body["resource"]
        assert isinstance(resource, dict)
        target, field = resource, field.split(".", 1)[1]
    if value is KeyError:
        del target[field]
    else:
        target[field] = value  # type: ignore[assignment]
    return body


def _cases() -> Iterator[tuple[str, dict[str, Json]]]:
    yield "base", copy.deepcopy(BASE)
    for field in FIELDS:
        yield f"{field} missing", _mutated(field, KeyError)
        for value in VALUES:
            yield f"{field}={value!r}", _mutated(field, value)
    yield "unknown field", {**copy.deepcopy(BASE), "extra": 1}
    yield "as array", list(copy.deepcopy(BASE).values())  # type: ignore[misc]


@pytest.mark.parametrize("body", [body for _, body in _cases()], ids=[name for name, _ in _cases()])
def test_the_one_pass_decoder_answers_as_the_struct_decoder(body: dict[str, Json]) -> None:
    assert _outcome(raw_command, body) == _outcome(_decoded_raw, body)


def test_the_one_pass_decoder_takes_the_common_body() -> None:
    # Without this the comparison above would pass with the shortcut never taken.
    assert raw_command(copy.deepcopy(BASE)) == _decoded_raw(copy.deepcopy(BASE))
    assert plain_raw(copy.deepcopy(BASE)) == tuple(_decoded_raw(copy.deepcopy(BASE)))
    assert plain_raw({**copy.deepcopy(BASE), "expected_revision": 3}) is not None


_KINDS = sorted({field.kind for fields in STRUCTS.values() for field in fields} | {"u64", "bool"})


@pytest.mark.parametrize("kind", _KINDS)
def test_a_quick_test_passes_only_what_the_field_decoder_keeps_as_it_is(kind: str) -> None:
    quick = quick_test(kind)
    if kind.startswith("struct:"):
        assert quick is None
        return
    assert quick is not None
    passed = [value for value in [*VALUES, 0, "succeeded", "failed", "Failed"] if quick(value)]
    assert passed, f"no value takes the {kind} shortcut"
    for value in passed:
        kept = _field_value(Field("f", kind), value, STRUCTS)
        assert type(kept) is type(value) and kept == value, (kind, value)


@settings(max_examples=100)
@given(st.lists(st.none() | st.integers() | st.text(max_size=4), min_size=len(Row._fields),
                max_size=len(Row._fields)))
def test_build_makes_the_record_its_constructor_makes(fields: list[object]) -> None:
    built = build(Row, tuple(fields))
    assert type(built) is Row and built == Row(*fields) and built.body == Row(*fields).body


# Every row shape the log takes: a change with and without a body, with and without the
# handoff fields, and a handoff row with an empty source.
_ROW_SHAPES = [
    (1, "t", "p", 1, "custom.note", "n1", 1, "a", 5, '{"i":1}', "c1", "f" * 64, None, None, None, None),
    (2, "t", "p", 2, "custom.note", "n1", 2, "a", 6, None, "c2", "f" * 64, None, None, None, None),
    (3, "t", "p", 3, "handoff", "h1", 1, "a", 7, "{}", "c3", "f" * 64, "a", "b", None, "pending"),
    (4, "t", "p", 4, "handoff", "h1", 2, "a", 8, "{}", "c4", "f" * 64, "a", "b", "s1", "claimed"),
]


def test_an_insert_without_the_none_fields_stores_the_row_the_full_insert_stores() -> None:
    full_sql = append_statement(handoff_fields=True)
    names = full_sql[full_sql.index("(") + 1:full_sql.index(")")].split(", ")  # the log's columns, in order
    assert len(names) == len(Row._fields)
    short, full = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for conn in (short, full):
        conn.execute(f"CREATE TABLE log({', '.join(names)})")
    statements = AppendStatements("log", names)
    for row in _ROW_SHAPES:
        short.execute(*statements.of(row))
        full.execute(full_sql, row)
    assert short.execute("SELECT * FROM log").fetchall() == full.execute("SELECT * FROM log").fetchall() == [
        tuple(row) for row in _ROW_SHAPES]
    # The store's common statement is the shape cache's, not a second spelling of it.
    assert append_statement(handoff_fields=False) == statements.statement(tuple(range(12, 16)))


ids = st.from_regex(r"[A-Za-z0-9._:@-]{1,128}", fullmatch=True)
names = st.from_regex(r"[a-z0-9._-]{1,96}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _canonical_envelope(project_id: str, expected: int | None, operation: str, payload: Json, kind: str,
                        resource_id: str, change: str) -> str:
    envelope = {"project_id": project_id, "expected_revision": expected, "operation": operation, "payload": payload,
                "resource": {"kind": kind, "id": resource_id}, "change": change}
    return hashlib.sha256(canonical_json(envelope).encode()).hexdigest()


@settings(max_examples=200)
@given(ids, st.none() | st.integers(1, (1 << 64) - 1), names, json_values, names, ids,
       st.sampled_from(["upsert", "delete"]))
def test_the_envelope_digest_hashes_the_canonical_envelope(project_id: str, expected: int | None, operation: str,
                                                           payload: Json, kind: str, resource_id: str,
                                                           change: str) -> None:
    want = _canonical_envelope(project_id, expected, operation, payload, kind, resource_id, change)
    assert envelope_digest(project_id, expected, operation, canonical_json(payload), kind, resource_id, change) == want
    assert fingerprint(project_id=project_id, expected_revision=expected, operation=operation, payload=payload,
                       resource_kind=kind, resource_id=resource_id, change=change) == want


@settings(max_examples=100)
@given(st.text(), st.text(), st.text(), st.text(), st.text())
def test_fingerprint_escapes_any_text(project_id: str, operation: str, kind: str, resource_id: str,
                                      change: str) -> None:
    want = _canonical_envelope(project_id, None, operation, None, kind, resource_id, change)
    assert fingerprint(project_id=project_id, expected_revision=None, operation=operation, payload=None,
                       resource_kind=kind, resource_id=resource_id, change=change) == want


def _serde_form(value: Json) -> str:
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


@settings(max_examples=300)
@given(json_values)
def test_canonical_json_is_the_general_encoding(value: Json) -> None:
    assert canonical_json(value) == _serde_form(value)


@pytest.mark.parametrize("value", [
    {"a": "1.5", "b": "2e3", "c": 7}, {"a": 1e16, "b": "x"}, [1, 2.5, "3.0"], {"n": -0.0}, {"big": 1.5e300},
    {"k": "v1.2", "n": [1e-7]},
])
def test_float_looking_strings_and_real_floats(value: Json) -> None:
    assert canonical_json(value) == _serde_form(value)


@settings(max_examples=100)
@given(ids, st.from_regex(r"[0-9a-f]{64}", fullmatch=True), ids, ids, ids, st.integers(1, 1 << 62), names, ids,
       st.integers(1, 1 << 62), st.integers(0, 1 << 62))
def test_a_receipt_is_upstreams_command_receipt(command_id: str, digest: str, tenant: str, project: str, actor: str,
                                                seq: int, kind: str, resource_id: str, revision: int,
                                                at: int) -> None:
    receipt = Receipt(command_id=command_id, fingerprint=digest, tenant_id=tenant, project_id=project, actor_id=actor,
                      project_seq=seq, kind=kind, resource_id=resource_id, revision=revision, committed_at_ms=at)
    want = {"command_id": command_id, "fingerprint": digest, "tenant_id": tenant, "project_id": project,
            "actor_id": actor, "project_seq": seq, "resource": {"kind": kind, "id": resource_id},
            "revision": revision, "committed_at_ms": at}
    assert receipt.to_json() == json.dumps(want, separators=(",", ":"))


def test_exact_paths_answer_as_parsed_paths(tmp_path: Path) -> None:
    ledger = ReferenceLedger(tmp_path / "l.sqlite", test_clock=False)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token="token-0123456789")
    headers = [(b"authorization", b"Bearer token-0123456789"), (b"content-type", b"application/json")]
    body = json.dumps(BASE).encode()
    for path in ("/health", "/openapi.json", "/v1/commands"):
        for method in ("GET", "HEAD", "POST", "PUT"):
            fast = ledger.handle(method, path, headers, body)
            # "path?" is routed by parsing (an empty query), "path" by the exact-path table.
            assert ledger.handle(method, path.encode(), headers, body) == fast
            assert ledger.handle(method, path + "?", headers, body) == fast, (method, path)


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("-0", -0.0), ("-1", -1), ("999999999999999999", 999_999_999_999_999_999),
    ("-99999999999999999", -99_999_999_999_999_999), ("9223372036854775807", (1 << 63) - 1),
    ("-9223372036854775808", -(1 << 63)), ("18446744073709551615", (1 << 64) - 1),
    ("18446744073709551616", float(1 << 64)), ("-9223372036854775809", float(-(1 << 63) - 1)),
])
def test_integers_parse_as_serde_keeps_them(text: str, value: int | float) -> None:
    parsed = parse_json(f"[{text}]".encode())
    assert isinstance(parsed, list) and type(parsed[0]) is type(value) and parsed[0] == value
    assert str(parsed[0]) == str(value)  # -0.0 is not 0.0


def test_header_pairs_of_every_accepted_shape_answer_alike(tmp_path: Path) -> None:
    ledger = ReferenceLedger(tmp_path / "l.sqlite")
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token="token-0123456789")
    body = json.dumps(BASE).encode()
    auth, kind = ("authorization", "Bearer token-0123456789"), ("content-type", "application/json")
    as_bytes = [(auth[0].encode(), auth[1].encode()), (kind[0].encode(), kind[1].encode())]
    shapes: list[object] = [as_bytes, tuple(as_bytes), [auth, kind], [as_bytes[0], kind], dict([auth, kind]),
                            dict(as_bytes)]
    answers = {ledger.handle("POST", "/v1/commands", shape, body) for shape in shapes}  # type: ignore[arg-type]
    assert len(answers) == 1 and next(iter(answers)).status == 200


# -- the raw route's shortcut: ``Service._plain_command`` and ``SQLiteStore.put_plain`` ----------------
_TOKENS = {"a": "token-a-0123456789", "b": "token-b-0123456789", "r": "token-r-0123456789"}


def _general(*args: object) -> object:
    """``_store.execute`` as a replaced recipe: a ledger given it never takes the shortcut."""
    from aidememo_ref._store import execute

    return execute(*args)  # type: ignore[arg-type]


def _ledger(path: Path, *, shortcut: bool) -> ReferenceLedger:
    from aidememo_ref import ManualClock

    ledger = ReferenceLedger(path, clock=ManualClock(1_767_225_600_000), execute=None if shortcut else _general)
    for actor, token in _TOKENS.items():
        ledger.provision(tenant_id="t", project_id="p", actor_id=actor, token=token, project_epoch="e1",
                         role="reader" if actor == "r" else "writer")
    return ledger


def _put(cid: str, rid: str = "n1", *, expected: int | None = None, payload: Json = None, delete: bool = False,
         kind: str = "custom.note", **extra: Json) -> bytes:
    body: dict[str, Json] = {
        "command_id": cid, "project_id": "p", "expected_revision": expected,
        "operation": "resource.delete" if delete else "resource.put",
        "payload": None if delete else ({"v": cid} if payload is None else payload),
        "resource": {"kind": kind, "id": rid}, "change": "delete" if delete else "upsert", **extra}
    return json.dumps(body).encode()


def _headers(actor: str | None, content_type: bytes = b"application/json") -> list[tuple[bytes, bytes]]:
    pairs = [(b"content-type", content_type)]
    return pairs if actor is None else [(b"authorization", f"Bearer {_TOKENS[actor]}".encode()), *pairs]


# Every outcome a raw command has: new, changed, deleted and recreated resources; expected revisions
# right, stale and of a missing resource; replays, a conflicting replay, refusals of the body, the
# rules, the role and the token; header spellings; in this order, several of them twice.
_SCRIPT: list[tuple[str | None, bytes, list[tuple[bytes, bytes]] | None]] = [
    ("a", _put("c1"), None), ("a", _put("c2"), None), ("a", _put("c2"), None), ("a", _put("c2", payload=7), None),
    ("a", _put("c3", expected=2), None), ("a", _put("c4", expected=2), None), ("a", _put("c5", "n9", expected=1), None),
    ("a", _put("c6", delete=True), None), ("a", _put("c7", delete=True), None), ("a", _put("c8", payload=[1.5]), None),
    ("a", _put("c9", delete=True, expected=4), None), ("a", _put("c10", "n2", payload={"k": "é\u2028"}), None),
    ("a", _put("c11", kind="session"), None), ("a", _put("c12", delete=True, payload=1), None),
    ("b", _put("c1"), None), ("b", _put("c13", "n2", expected=1), None), ("r", _put("c14"), None), (None, _put("c15"), None),
    ("a", _put("c16", extra=1), None), ("a", b'{"command_id": "c17"', None), ("a", _put("c18") + b" ", None),
    ("a", _put("c19"), _headers("a", b"text/plain")), ("a", _put("c20"), [(b"Authorization", b"Bearer " + _TOKENS["a"].encode()),
                                                                    (b"Content-Type", b"application/json")]),
    ("a", _put("c21"), [(b"authorization", b"Bearer nope-0123456789"), *_headers("a")]),
    ("a", _put("c22", "n3", payload=2**70), None), ("a", _put("c23", "n4", expected=2**64), None),
    ("a", _put("c1"), None), ("b", _put("c24", "n1", expected=3), None),
]


def _answers(ledger: ReferenceLedger) -> list[tuple[int, tuple[tuple[str, str], ...], bytes]]:
    answers = []
    for actor, body, headers in _SCRIPT:
        response = ledger.handle("POST", "/v1/commands", _headers(actor) if headers is None else headers, body)
        answers.append((response.status, response.headers, response.body))
        ledger.clock.advance(1)  # type: ignore[attr-defined]
    return answers


def _log(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM log ORDER BY n").fetchall()


def test_the_raw_shortcut_answers_and_writes_as_the_general_path(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from aidememo_ref._sqlite import SQLiteStore

    taken: list[bool] = []
    put_plain = SQLiteStore.put_plain

    def counted(self: SQLiteStore, *args: object) -> object:
        receipt = put_plain(self, *args)  # type: ignore[arg-type]
        taken.append(receipt is not None)
        return receipt

    monkeypatch.setattr(SQLiteStore, "put_plain", counted)
    general = _answers(_ledger(tmp_path / "general.sqlite", shortcut=False))
    assert taken == []  # a replaced recipe turns the shortcut off
    fast = _answers(_ledger(tmp_path / "fast.sqlite", shortcut=True))
    assert fast == general
    assert _log(tmp_path / "fast.sqlite") == _log(tmp_path / "general.sqlite")
    # Without this the comparison would pass with the shortcut never taken: new commands of a
    # remembered caller take it, the rest go back to the general path.
    assert sum(taken) >= 8 and not all(taken)
    assert {status for status, _, _ in general} >= {200, 400, 401, 403, 404, 409}


@pytest.mark.parametrize("change", [
    "UPDATE memberships SET status='suspended' WHERE actor_id='a'",
    "UPDATE token_bindings SET active=0 WHERE actor_id='a'",
    "UPDATE memberships SET role='reader' WHERE actor_id='a'",
    "INSERT INTO log SELECT n + 1, tenant_id, project_id, seq + 1, kind, id, revision + 1, actor_id, committed_at_ms, "
    "body, 'other', fingerprint, from_actor, to_actor, source_id, status FROM log ORDER BY n DESC LIMIT 1",
])
def test_the_raw_shortcut_sees_another_connections_commit(tmp_path: Path, change: str) -> None:
    answers = []
    for shortcut in (False, True):
        path = tmp_path / f"{shortcut}.sqlite"
        ledger = _ledger(path, shortcut=shortcut)
        first = ledger.handle("POST", "/v1/commands", _headers("a"), _put("c1"))  # remembered from here on
        with sqlite3.connect(path) as other:
            other.execute(change)
        second = ledger.handle("POST", "/v1/commands", _headers("a"), _put("c2"))
        replay = ledger.handle("POST", "/v1/commands", _headers("a"), _put("other"))
        answers.append(([(r.status, r.body) for r in (first, second, replay)], _log(path)))
    assert answers[0] == answers[1]


def test_a_planted_raw_rule_runs_on_the_shortcut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Mutation testing rewrites the rule modules in place (``scripts/mutation.py``): the shortcut
    # must reach ``_ledger.decide`` and ``_raw`` as the general path does, or a mutated rule would
    # go unseen on every new raw command.
    from aidememo_ref import _ledger as rules
    from aidememo_wire.errors import LedgerError

    def refused(command: object, payload: object, view: object) -> object:
        raise LedgerError.stale_revision(1, 2)

    monkeypatch.setattr(rules, "_raw", refused)
    for shortcut in (False, True):
        ledger = _ledger(tmp_path / f"{shortcut}.sqlite", shortcut=shortcut)
        ledger.handle("POST", "/v1/commands", _headers("a"), _put("c0"))  # remembered: the next one may take it
        answer = ledger.handle("POST", "/v1/commands", _headers("a"), _put("c1"))
        assert (answer.status, b"stale_revision" in answer.body) == (409, True), (shortcut, answer.body)
        assert _log(tmp_path / f"{shortcut}.sqlite") == []
