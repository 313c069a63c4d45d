"""A memory's JSON both ways, the capture answer's one-format text, and the compiled schema checks.

The log keeps each capture's answer and memory is rebuilt from it, so the answer must show the
memory exactly (``memory_from_json`` gives it back) and the one-format ``answer_text`` must be the
text ``json`` writes for the answer object. The REST bodies are checked by ``fastjsonschema``
first; only ``jsonschema``'s verdict counts, so whatever the compiled check accepts jsonschema
must accept too.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from xmemo_ref import _decode
from xmemo_ref._codec import answer_text, canonical_json, compact_json, memory_from_json, memory_json
from xmemo_ref._errors import RequestError
from xmemo_ref._records import Kind, Memory, MemoryType, Tenant, Trust
from xmemo_ref._schemas import REST

TENANT = Tenant(owner_id="acme", organization_id="org-acme", workspace_id="ws-acme", project_id="acme")
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # no lone surrogates: not UTF-8
optional = st.none() | texts
stamps = st.integers(-62_135_596_800_000, 253_402_300_799_999)  # years 1 to 9999
metadata = st.dictionaries(texts, st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=8),
    max_size=4).map(canonical_json)


@st.composite
def memories(draw: Any) -> Memory:
    unit = st.none() | st.floats(0, 1) | st.sampled_from([0, 1])
    return Memory(
        id=draw(texts), tenant=TENANT, kind=draw(st.sampled_from(Kind)), content=draw(texts), path=draw(texts),
        bucket=draw(texts), scope=draw(optional), team_id=draw(optional), memory_type=draw(st.sampled_from(MemoryType)),
        status=draw(texts), importance=draw(unit), confidence=draw(unit), semantic_key=draw(optional),
        state_key=draw(optional), event_type=draw(optional), session_id=draw(optional), source=draw(optional),
        agent_id=draw(optional), agent_instance_id_hash=draw(optional), agent_trust=draw(st.sampled_from(Trust)),
        metadata_json=draw(metadata), version=draw(st.integers(1, 10**6)), created_at_ms=draw(stamps),
        updated_at_ms=draw(stamps), expires_at_ms=draw(st.none() | stamps),
    )


@settings(max_examples=300, deadline=None)
@given(memories(), st.sampled_from(["created", "updated", "unchanged"]), st.none() | texts)
def test_the_answer_text_is_the_answer_object_written_by_json(memory: Memory, outcome: str, key: str | None) -> None:
    shown = memory_json(memory) | {"write": outcome}
    if key is not None:
        shown["idempotency_key"] = key
    text = answer_text(memory, outcome, key)
    assert text == compact_json(shown)
    back = memory_from_json(TENANT, json.loads(text))
    floats = {"importance": None if memory.importance is None else float(memory.importance),
              "confidence": None if memory.confidence is None else float(memory.confidence)}
    assert back == Memory(**{**{f: getattr(memory, f) for f in Memory._fields}, **floats})


bodies = st.dictionaries(
    st.sampled_from(["content", "path", "memory_type", "status", "importance", "confidence", "semantic_key", "dedupe",
                     "expires_at", "provenance", "bucket", "scope", "team_id", "source", "metadata",
                     "idempotency_key", "state_key", "current_task", "ttl_seconds", "query", "max_items",
                     "max_tokens", "prefer_working", "event_type", "occurred_at", "session_id", "since", "path"]),
    st.none() | st.booleans() | st.integers(-2, 2_000_000) | st.floats(-1, 2) | st.sampled_from(
        ["", " ", "x", "auto", "semantic", "working", "%", "a%b", "active", "Active", "a\n", "abc_def", "9x", "x" * 300])
    | st.lists(st.integers(), max_size=2) | st.dictionaries(texts, st.integers(), max_size=2),
    max_size=8,
) | st.none() | st.lists(st.integers(), max_size=2) | texts


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(sorted(REST)), bodies)
def test_the_compiled_check_never_accepts_what_jsonschema_refuses(name: str, body: object) -> None:
    try:
        _decode._compiled(name)(body)
    except Exception:
        return  # refused: jsonschema has the last word, as _decode._check asks it
    assert _decode._problems(name, body) == []


def test_a_body_only_jsonschema_accepts_is_accepted() -> None:
    # fastjsonschema reads the pattern's $ as end of text; jsonschema (Python's re.search) also
    # before a final newline, so this status passes only jsonschema, which decides.
    body = {"content": "c", "path": "p", "status": "done\n"}
    try:
        _decode._compiled("remember")(body)
    except Exception:
        pass
    else:
        raise AssertionError("the two checks agree on this body; the test needs one they differ on")
    assert _decode.decode_remember(body).status == "done\n"
    try:
        _decode.decode_remember({"content": "c", "path": "p", "status": "Done"})
    except RequestError as exc:
        assert exc.status == 422 and exc.detail[0]["loc"] == ["body", "status"]  # type: ignore[index]
    else:
        raise AssertionError("an invalid status was accepted")
