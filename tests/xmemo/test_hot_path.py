"""The capture hot path (``xmemo_ref._hot``) against the general code each shortcut stands for.

``plain_remember`` must give ``decode_remember``'s record for every body it takes and leave every
other body (each one the schema refuses among them) to it, and no cache may keep an API key; the
reused answer middle must give ``_codec.answer_text`` exactly. One test sends the same
requests to two references, one of them with the one-pass decoder switched off, and compares
every answer byte for byte, the refusals' wording included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidememo_ref import ManualClock
from xmemo_ref import XMemoReference, _hot, _service
from xmemo_ref._codec import answer_text as general_answer_text
from xmemo_ref._codec import number_text
from xmemo_ref._decode import decode_remember, idempotency_key, parse_body
from xmemo_ref._errors import RequestError
from xmemo_ref._http import AGENT_HEADER
from xmemo_ref._records import Kind, Memory, MemoryType, Tenant, Trust

from .test_codec import memories

KEY = "xm-hot-path-key-0123456789abcdef"
# Values at and past each bound, of each JSON type, and the wildcards and blanks the rules refuse.
TEXTS = ["", " ", "\t\n", "a", "deploy fix", "%", "a%", "*", "é ☃", "a\nb", "x" * 128, "x" * 129, "x" * 256,
         "x" * 257, "x" * 512, "x" * 513, "active", "Active", "stale_note"]
VALUES: list[Any] = [*TEXTS, None, True, False, 0, 1, 0.5, 1.5, -1, 0.0, -0.0, 1.0, 1.0000001, 1e-300, float("nan"),
          float("inf"), [], ["a"], {}, {"a": 1}, {"b": [1.5, None, {"z": "é", "a": float("nan")}], "a": -0.0},
                     "auto", "semantic", "episodic", "procedural", "working", "identity", "Semantic"]
FIELDS = ["content", "path", "scope", "bucket", "team_id", "source", "semantic_key", "memory_type",
          "status", "importance", "confidence", "dedupe", "metadata", "provenance", "expires_at",
          "idempotency_key", "unknown_field"]
PLAIN = {"content": "deploy adapter decision", "path": "bench/1", "scope": "bench"}

# the fields the one-pass decoder checks itself
PLAIN_FIELDS = [*FIELDS[:8], "importance", "confidence", "dedupe", "metadata"]
bodies = st.one_of(
    st.fixed_dictionaries({"content": st.sampled_from(TEXTS), "path": st.sampled_from(TEXTS)},
                          optional={field: st.sampled_from(["a", "deploy fix", "semantic"]) | st.sampled_from(VALUES)
                                    for field in PLAIN_FIELDS[2:]}),  # one edge among valid fields
    st.fixed_dictionaries({"content": st.sampled_from(TEXTS), "path": st.sampled_from(TEXTS)},
                          optional={field: st.sampled_from(VALUES) for field in FIELDS[2:]}),
    st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(VALUES), max_size=6),
    st.sampled_from(VALUES),  # not an object at all
)


def _outcome(decode: Callable[[object], object], body: object) -> object:
    try:
        return decode(body)
    except RequestError as error:
        return error.status, error.detail


@settings(max_examples=600, deadline=None)
@given(bodies)
def test_the_one_pass_decoder_takes_only_what_the_schema_decoder_accepts_and_gives_its_record(body: object) -> None:
    fast = _hot.plain_remember(body)
    if fast is not None:
        assert _outcome(decode_remember, body) == fast
        assert idempotency_key({}, body) is None  # the service answers it without a key


def _one_field_changed() -> list[dict[str, Any]]:
    changed = [{k: v for k, v in PLAIN.items() if k != field} for field in PLAIN]
    return changed + [{**PLAIN, field: value} for field in FIELDS for value in VALUES]


@pytest.mark.parametrize("body", _one_field_changed())
def test_each_field_at_each_edge_is_decoded_in_one_pass_or_left_to_the_schema(body: dict[str, Any]) -> None:
    fast = _hot.plain_remember(body)
    assert fast is None or _outcome(decode_remember, body) == fast


@pytest.mark.parametrize("body", [
    PLAIN, {"content": "c", "path": "p"}, {**PLAIN, "bucket": "public", "team_id": "t", "source": "s"},
    {**PLAIN, "memory_type": "auto"}, {**PLAIN, "memory_type": "working", "semantic_key": "k", "scope": None},
    # as the published clients send them (bench/xmemo.py's mix): Hermes, OpenClaw's auto-capture, MAF
    {**PLAIN, "bucket": "work", "memory_type": "semantic", "dedupe": True, "importance": 0.8, "semantic_key": "k"},
    {**PLAIN, "memory_type": "auto", "importance": 0.7, "source": "openclaw-auto-capture",
     "metadata": {"category": "decision"}},
    {**PLAIN, "bucket": "work", "source": "maf", "semantic_key": "maf-capture:ab", "dedupe": True,
     "metadata": {"capture": {"run_id": "r", "source_ids": ["m"], "server_receipts": [], "idempotency_key": "ab"}}},
])
def test_the_common_bodies_take_the_one_pass_decoder(body: dict[str, Any]) -> None:
    assert _hot.plain_remember(body) == decode_remember(body)


TENANT = Tenant(owner_id="acme", organization_id="org-acme", workspace_id="ws-acme", project_id="acme")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(memories(), st.sampled_from(["created", "updated", "unchanged"]),
                          st.none() | st.sampled_from(["k", "k\"2"])), min_size=1, max_size=4))
def test_the_reused_answer_middle_gives_the_general_answer_text(writes: list[tuple[Memory, str, str | None]]) -> None:
    for memory, outcome, key in writes * 2:  # again: from the middle the first round stored
        assert _hot.answer_text(memory, outcome, key) == general_answer_text(memory, outcome, key)


@pytest.mark.parametrize(("importance", "metadata"), [(None, ("{}", "{}")), (0.7, ('{"a":1}', '{"a":2}')),
                                                     (1, ("{}", '{"capture":{"k":"x"}}'))])
def test_the_answer_middle_is_reused_for_a_new_memory_of_the_same_shape(
        importance: float | None, metadata: tuple[str, str]) -> None:
    """The same fields from bucket to agent_trust, numbers and metadata included: their own
    metadata, as the Agent Framework's captures carry, does not keep the rest from being reused."""
    base = Memory(id="m1", tenant=TENANT, kind=Kind.MEMORY, content="one", path="p", bucket="work", scope="s",
                  team_id=None, memory_type=MemoryType.SEMANTIC, status="active", importance=importance,
                  confidence=None, semantic_key=None, state_key=None, event_type=None, session_id=None, source=None,
                  agent_id="a", agent_instance_id_hash=None, agent_trust=Trust.CLIENT_ASSERTED,
                  metadata_json=metadata[0], version=1, created_at_ms=1, updated_at_ms=2, expires_at_ms=None)
    _hot.answer_text(base, "created", None)
    again = Memory(**{**{f: getattr(base, f) for f in Memory._fields}, "metadata_json": metadata[1],
                      "id": "m2", "content": 'two "quoted" ☃', "path": "q", "created_at_ms": 5, "updated_at_ms": 9})
    assert _shape(again) in _hot._middles
    assert _hot.answer_text(again, "created", "key") == general_answer_text(again, "created", "key")


def _shape(m: Memory) -> tuple[object, ...]:
    """The fields the answer middle is kept by: bucket to agent_trust, but the semantic key."""
    return (m.bucket, m.scope, m.team_id, m.memory_type, m.status, number_text(m.importance),
            number_text(m.confidence), m.state_key, m.event_type, m.session_id, m.source, m.agent_id,
            m.agent_instance_id_hash, m.agent_trust)


@pytest.mark.parametrize("keys", [(None, "maf-capture:0a1b"), ("hermes:p:1", "hermes:p:2"), ("k", None),
                                  ("a", 'quoted "key", \\ ☃')])
def test_a_new_semantic_key_reuses_the_middle_of_its_shape(keys: tuple[str | None, str | None]) -> None:
    """The Agent Framework sends a new semantic key with every capture (a digest of its content):
    the middle is kept without it, and the key is written between its two parts."""
    _hot._middles.clear()
    base = Memory(id="m1", tenant=TENANT, kind=Kind.MEMORY, content="one", path="p", bucket="work", scope="s",
                  team_id=None, memory_type=MemoryType.SEMANTIC, status="active", importance=0.5,
                  confidence=None, semantic_key=keys[0], state_key=None, event_type=None, session_id=None,
                  source="maf-agent", agent_id="a", agent_instance_id_hash=None, agent_trust=Trust.CLIENT_ASSERTED,
                  metadata_json="{}", version=1, created_at_ms=1, updated_at_ms=2, expires_at_ms=None)
    assert _hot.answer_text(base, "created", None) == general_answer_text(base, "created", None)
    again = base._replace(id="m2", semantic_key=keys[1])
    assert list(_hot._middles) == [_shape(again)]
    assert _hot.answer_text(again, "created", None) == general_answer_text(again, "created", None)
    assert len(_hot._middles) == 1


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"00000000-0000-4000-8000-{self.n:012d}"


def _reference(path: Path) -> XMemoReference:
    ref = XMemoReference(path, clock=ManualClock(1_767_225_600_000), new_id=_Ids())
    ref.provision(owner_id="acme", key=KEY)
    return ref


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[XMemoReference, XMemoReference]:
    where = tmp_path_factory.mktemp("hot")
    return _reference(where / "hot.sqlite"), _reference(where / "general.sqlite")


raw_bodies = st.one_of(bodies.map(lambda b: json.dumps(b).encode()),
                       st.sampled_from([b"", b"{", b"[]", b"null", b'{"content": "a", "path": "p"} x', b"\xff",
                                        b'{"content": "\\ud800", "path": "p"}']))
# Bodies that start as one JSON object and then go wrong, or end in a brace that is not its own.
EDGE_BYTES = [b"{}", b"{ }", b'{"a": 1} }', b'{"a": 1}}', b'{"a": 1} x}', b'{"a": {}', b'{"a": "}', b"{\x00}",
              b'{"a": "\xff"}', b'{"a": "\\ud800"}', b'{"a": 1, }', b'{"a": NaN}', b'{"a": 1e999}', b' {"a": 1}',
              b'{"a": 1} ', b'{"a": 1}\n', b'{"a": "\x01"}', b'{"a":1,"a":2}', b"{" + b'"a":[' * 50 + b"]" * 50 + b"}"]


def _parsed(parse: Callable[[bytes], object], raw: bytes) -> object:
    try:
        return repr(parse(raw))  # repr: NaN is not equal to itself, and 1 == 1.0
    except RequestError as error:
        return error.status, error.detail


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(EDGE_BYTES), st.binary(max_size=12).map(lambda tail: b'{"a": ' + tail),
                 bodies.map(lambda b: json.dumps(b).encode())))
def test_the_direct_scan_parses_as_parse_body(raw: bytes) -> None:
    assert _parsed(_hot.plain_json, raw) == _parsed(parse_body, raw)


sent_headers = st.sampled_from([{}, {"idempotency-key": "k1"}, {AGENT_HEADER: "codex"}, {AGENT_HEADER: "x" * 129},
                                {"x-idempotency-key": "k2", AGENT_HEADER: "claude"}])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=raw_bodies, extra=sent_headers)
def test_a_capture_answers_as_it_does_without_the_one_pass_decoder(
        pair: tuple[XMemoReference, XMemoReference], body: bytes, extra: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    hot, general = pair
    headers = [(b"x-api-key", KEY.encode()), *((k.encode(), v.encode()) for k, v in extra.items())]
    fast = hot.service.handle("POST", "/v1/remember", headers, body)
    with monkeypatch.context() as patched:
        patched.setattr(_service, "plain_remember", lambda body: None)
        patched.setattr(_service, "plain_json", parse_body)
        slow = general.service.handle("POST", "/v1/remember", headers, body)
    def seen(response: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        return response.status, [h for h in response.headers if h[0] != "X-XMemo-Audit-ID"], response.body

    assert seen(fast) == seen(slow)


def test_no_process_wide_cache_keeps_an_api_key(pair: tuple[XMemoReference, XMemoReference]) -> None:
    """A cache keyed by the sent credential would keep every key ever sent, for the process's life."""
    hot, _ = pair
    for headers in ([(b"x-api-key", KEY.encode())], [(b"authorization", f"Bearer {KEY}".encode())]):
        answer = hot.service.handle("POST", "/v1/remember", [*headers, (AGENT_HEADER.encode(), b"codex")],
                                    b'{"content": "kept?", "path": "p"}')
        assert answer.status == 200
    kept = [name for name, value in vars(_hot).items() if isinstance(value, dict) and KEY in repr(value)]
    assert kept == [], f"_hot.{kept} holds the raw API key"


AGENT_VALUES = [None, "codex", " codex ", "claude", "", "x" * 129, "bad\x01id"]


@pytest.mark.parametrize("bound", [None, "codex"])
def test_a_kept_caller_is_the_one_its_principal_and_agent_headers_give(bound: str | None) -> None:
    """The service keeps a resolved caller by the principal object and the two agent headers as
    sent: whatever the order of requests, each gets what resolving it afresh gives (or its 422),
    a refused header is never kept, and an equal principal that is another object is resolved anew."""
    from xmemo_ref._http import INSTANCE_HEADER, HttpRequest
    from xmemo_ref._records import Principal
    from xmemo_ref._service import XMemoService

    principals = [Principal(tenant=TENANT, scopes=("memory:read", "memory:write"), bound_agent_id=bound)
                  for _ in range(2)]
    cache: _hot.Callers = {}
    for principal in principals * 2:
        for agent in AGENT_VALUES:
            for instance in (None, "laptop", "laptop"):
                sent = [(name.encode(), value.encode()) for name, value in
                        ((AGENT_HEADER, agent), (INSTANCE_HEADER, instance)) if value is not None]
                request = HttpRequest.build("POST", "", sent, b"")
                fresh = _outcome(lambda r: XMemoService._attribute(principal, r, None, None), request)
                assert _outcome(lambda r: _hot.cached_caller(cache, principal, r, XMemoService._attribute),
                                request) == fresh
    assert all(kept[1] == XMemoService._attribute(kept[0], HttpRequest.build("POST", "", [
        (name.encode(), value.encode()) for name, value in ((AGENT_HEADER, key[1]), (INSTANCE_HEADER, key[2]))
        if value is not None], b""), None, None) and key[0] == id(kept[0]) for key, kept in cache.items())
    assert {key[1] for key in cache} == {None, "codex", " codex ", "claude", ""}


@pytest.mark.parametrize("sent", [
    [(b"x-api-key", KEY.encode())], [(b"x-api-key", f" {KEY} ".encode())],
    [(b"x-api-key", KEY.encode()), (b"authorization", b"Bearer other-key-0123456789abcdef")],
    [(b"x-api-key", KEY.encode()), (b"authorization", f"Bearer {KEY}".encode())],
    [(b"x-api-key", KEY.encode()), (b"authorization", b"Basic eDp5")], [(b"x-api-key", b"")],
    [(b"x-api-key", b"unknown-key-0123456789abcdef")], [(b"authorization", f"Bearer {KEY}".encode())]])
def test_a_known_key_sent_alone_is_taken_as_sent_and_any_other_credential_is_checked_in_full(
        pair: tuple[XMemoReference, XMemoReference], sent: list[tuple[bytes, bytes]]) -> None:
    """The service takes an ``X-API-Key`` it already proved, sent without ``Authorization``, as
    ``credential`` would; every other request answers as a service that knows no key yet."""
    hot, general = pair
    assert hot.service.handle("GET", "/v1/auth/token/validate", [(b"x-api-key", KEY.encode())]).status == 200
    assert KEY in hot.service._digests
    general.service._digests.clear()
    answers = [ref.service.handle("GET", "/v1/auth/token/validate", sent) for ref in (hot, general)]
    assert [(a.status, a.body) for a in answers][0] == [(a.status, a.body) for a in answers][1]
