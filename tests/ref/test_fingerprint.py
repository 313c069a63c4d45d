"""The §7 test vectors, byte for byte, and serde's number formatting (errata 1)."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

from aidememo_ref import canonical_json, stable_claim_id, stable_operation_id
from aidememo_wire.canonical import JsonError, format_float, parse_json

VECTORS = [
    ("9413b2a5c2fb757a08ae01ef397c94a533a2fa8c4b63884006bd4e0a0f29e43f",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"a":{"b":3,"d":4},"z":2},"project_id":"project_http","resource":{"id":"note_http","kind":"custom.note"}}'),
    ("dded0eef1406b129f4189505b608e8ddacd7bfe1843ca47dc3b24666bae077fa",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"a":{"b":3,"d":4},"z":2},"project_id":"project_http","resource":{"id":"note_other","kind":"custom.note"}}'),
    ("eae7ae3e51243b0c3cb09af32fe64db64d273d525905f195464e3dfc1cd0515f",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"content":"different"},"project_id":"project_http","resource":{"id":"note_http","kind":"custom.note"}}'),
    ("67b990a2da1d1880290c8f6100f8cdb131b08f4273b561a2dc593c55cb9c68e5",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"content":"replica-v1"},"project_id":"project_http","resource":{"id":"note_replica","kind":"custom.note"}}'),
    ("9579ee6e4ef8a66079d4155b2509757915be2819c4db481d86416b6b602083d9",
     '{"change":"delete","expected_revision":1,"operation":"resource.delete","payload":null,"project_id":"project_http","resource":{"id":"note_replica","kind":"custom.note"}}'),
    ("b5e77245faf8bff81061b154a5de0dd3897a3e03b538e3319124f4f39524dbe7",
     '{"change":"upsert","expected_revision":null,"operation":"session.create","payload":{"session_id":"session_remote","source_id":"project:aidememo","topic":"Remote handoff contract"},"project_id":"project_http","resource":{"id":"session_remote","kind":"session"}}'),
    ("2160a1e9b56001207815dc4a639db9c47cfeb8f3d3daaab5899ff3933a227395",
     '{"change":"upsert","expected_revision":null,"operation":"fact.create","payload":{"content":"Codex P2 completed the review","fact_id":"fact_p2_result","session_id":"session_remote"},"project_id":"project_http","resource":{"id":"fact_p2_result","kind":"fact"}}'),
    ("559317958d95bc38dc9b27425207592f08e6e7bc0f22f404ba56c757f6ec54c2",
     '{"change":"upsert","expected_revision":null,"operation":"handoff_context.create","payload":{"content":"# Bounded remote context\\n\\nReview the typed boundary.","context_id":"context_p2","handoff_id":"handoff_p2","session_id":"session_remote","to_actor":"codex-p2"},"project_id":"project_http","resource":{"id":"context_p2","kind":"handoff_context"}}'),
    ("c026f43821b2d8a18d5e5561c95492ef5e8d7e2eef8ddc3cbccbd1a132ac1652",
     '{"change":"upsert","expected_revision":null,"operation":"handoff.send","payload":{"context_id":"context_p2","done_when":"Return a session-scoped fact","focus":"Review the typed server boundary","handoff_id":"handoff_p2","session_id":"session_remote","to_actor":"codex-p2"},"project_id":"project_http","resource":{"id":"handoff_p2","kind":"handoff"}}'),
    ("998cca127d5faec77190f8889d046b76a233321f6d806f0c4e6c4182008b6812",
     '{"change":"upsert","expected_revision":null,"operation":"handoff.send","payload":{"context_id":null,"done_when":null,"focus":"Keep pagination deterministic","handoff_id":"handoff_p2_second","session_id":"session_remote","to_actor":"codex-p2"},"project_id":"project_http","resource":{"id":"handoff_p2_second","kind":"handoff"}}'),
    ("c5be34a65183e8de99f6d5a3690524174320870cbadb5430e7bdbdab84d15b3c",
     '{"change":"upsert","expected_revision":1,"operation":"handoff.accept","payload":{"claim_id":"claim_p2"},"project_id":"project_http","resource":{"id":"handoff_p2","kind":"handoff"}}'),
    ("1399fc77ac46fa8bab610e0d5969847b138383a75b88982db9fe1514cd217d22",
     '{"change":"upsert","expected_revision":2,"operation":"handoff.return","payload":{"claim_id":"claim_p2","outcome":"succeeded","result_fact_id":"fact_p2_result"},"project_id":"project_http","resource":{"id":"handoff_p2","kind":"handoff"}}'),
    ("2c352e223105ca4c37e6d15336d9f697d69fa9d99ee83e50d81f0d6e1128e88c",
     '{"change":"upsert","expected_revision":2,"operation":"handoff.heartbeat","payload":{"claim_id":"lease-claim-one"},"project_id":"project_lease","resource":{"id":"lease-handoff","kind":"handoff"}}'),
    ("8659957daf16bb869592c8d35ec28f05e3ce7facf4b1dc9b5baf2d30b78e6e98",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"content":"레디스 장애\\n복구","list":[3,1],"n":1.5,"nested":{"a":null,"b":true}},"project_id":"p","resource":{"id":"n1","kind":"custom.note"}}'),
    ("b28e8ef850182b76843f0f8d00009e3e69e29a9d335d5052dfd5488fc3e38f13",
     '{"change":"upsert","expected_revision":7,"operation":"resource.put","payload":{},"project_id":"p","resource":{"id":"n1","kind":"custom.note"}}'),
]


@pytest.mark.parametrize(("digest", "preimage"), VECTORS, ids=[v[0][:8] for v in VECTORS])
def test_canonical_form_is_byte_exact_and_hashes_to_the_vector(digest: str, preimage: str) -> None:
    value = json.loads(preimage)
    shuffled = dict(reversed(list(value.items())))  # insertion order must not matter
    text = canonical_json(shuffled)
    assert text == preimage
    assert hashlib.sha256(text.encode()).hexdigest() == digest


@pytest.mark.parametrize(
    ("value", "text"),
    [(1e21, "1e+21"), (1.5e-7, "1.5e-7"), (0.00001, "0.00001"), (1e17, "1e+17"), (1e16, "1e+16"),
     (1e15, "1000000000000000.0"), (100.0, "100.0"), (-0.0, "-0.0"), (0.1, "0.1"), (2.5e-5, "0.000025"),
     (1e-6, "1e-6"), (123456.789, "123456.789"), (-1.5e300, "-1.5e+300")],
)
def test_floats_print_as_serde_json_does(value: float, text: str) -> None:
    assert format_float(value) == text


def test_parse_follows_serde_number_rules() -> None:
    assert str(parse_json(b"-0")) == "-0.0"
    assert isinstance(parse_json(b"18446744073709551615"), int)
    assert isinstance(parse_json(b"18446744073709551616"), float)
    assert canonical_json(parse_json(b'{"b":1e21,"a":-0}')) == '{"a":-0.0,"b":1e+21}'


@pytest.mark.parametrize("body", [b"NaN", b"[1e999]", b'"\\ud800"', b"[" * 129 + b"]" * 129, b"[" * 100000, b"\xff"])
def test_bodies_serde_refuses_are_refused(body: bytes) -> None:
    with pytest.raises(JsonError):
        parse_json(body)


def test_nesting_at_the_limit_is_accepted() -> None:
    assert parse_json(b"[" * 128 + b"]" * 128) is not None


@pytest.mark.parametrize(
    ("prefix", "parts", "expected"),
    [
        ("command_accept", ["project", "actor", "handoff"],
         "command_accept_3e292a68dda101e5eb31cea2af4b30935898bc1d2b886366684bfa3b7a1e77e7"),
        ("command_return", ["project", "actor", "handoff"],
         "command_return_583fc7f732169a0d1f93cf0b483885b293a16b0351c63574ab098fe37875b594"),
        ("command_accept", ["ab", "c"], "command_accept_e6269794b1d56aa1c418d8df8da42ec658ae97d5dbf26659884245a7a0831da9"),
        ("command_accept", ["a", "bc"], "command_accept_b26f92dc64a358379f05cc5d24480a0255c1f481242bc26bea20a3a424b39fec"),
        ("claim", [], "claim_022763871284924c24827b71a2eebd1910ab49a59b4caecac35cb072958c1616"),
        ("command_session", ["project_cli_remote", "session_01"],
         "command_session_afb115c166e6a039f0b17004f3428c70a3be1c3d9f465f4a3ed11f8c15ce923c"),
        ("command_fact", ["project_cli_remote", "01JBBBBBBBBBBBBBBBBBBBBBBB"],
         "command_fact_1a26c6cca5942cf3d917830ba93064576c9bfcee052a0a3dab87d3b6bf527c2c"),
        ("command_context", ["project_cli_remote", "context_01JCCCCCCCCCCCCCCCCCCCCCCC"],
         "command_context_65e66843e8f142bbd681a380480a30f8fcba9611ba70ee40bb8aaf3ab32b78a2"),
        ("command_send", ["project_cli_remote", "handoff_01JAAAAAAAAAAAAAAAAAAAAAAA"],
         "command_send_4f6a50996578cc622fb391a0135289d4f0c0f5bc863c6c88855c3840dc7649bd"),
        ("command_send", ["project_cli_remote", "handoff_test"],
         "command_send_e605e347987bc45f5509133d981caa3a3db5a018231b8b27ebd698e4da6d3319"),
    ],
)
def test_stable_operation_ids_match_the_vectors(prefix: str, parts: list[str], expected: str) -> None:
    assert stable_operation_id(prefix, parts) == expected


def test_claim_and_derived_command_ids_chain_as_the_cli_does() -> None:
    claim = stable_claim_id("project_cli_remote", "codex-p2", "handoff_01JAAAAAAAAAAAAAAAAAAAAAAA", 1)
    assert claim == "claim_99baeeb38f94ca9a41abc8e9986294ce2b774a7224801737f3e7513b56d05e6a"
    base = ["project_cli_remote", "codex-p2", "handoff_01JAAAAAAAAAAAAAAAAAAAAAAA", claim]
    assert stable_operation_id("command_accept", base) == (
        "command_accept_96304f615c58001ccc03b3d3891abac6d6af5891778bc5dacaef9e9e220bf40d")
    assert stable_operation_id("command_heartbeat", [*base, "2"]) == (
        "command_heartbeat_c1658db98f41a42af36cd9c59591bad78a25e5daf96c38566b1249600c2bfaef")
    assert stable_operation_id("command_return", [*base, "01JBBBBBBBBBBBBBBBBBBBBBBB", "succeeded"]) == (
        "command_return_e3edabeab46414f5fd5e2f9150707aff80190a80b98c2dbff34a788f6efad33d")
    assert stable_claim_id("p", "a", "h", 1) == "claim_2c71563000087d5d8407f1b6c34e5f2ab5aabce8efe33cdf2d78cbcc0de09040"
    assert stable_claim_id("project_cli_remote", "codex-p2", "handoff_test", 2) == (
        "claim_ef5637d9df4db897096cdb1267dfbba871da52cd22a9a4416cf5d1890695b023")


@pytest.mark.parametrize("builtin", [True, False], ids=["cpython-own-sha256", "without-it"])
def test_token_digests_and_derived_ids_are_sha256_whichever_implementation_hashes(
        monkeypatch: pytest.MonkeyPatch, builtin: bool) -> None:
    """Bootstrap hashes with CPython's own SHA-256 (no OpenSSL to load); a build without it uses hashlib's."""
    from aidememo_wire import ids

    if builtin and not any(importlib.util.find_spec(name) for name in ("_sha2", "_sha256")):
        pytest.skip("this CPython was built without its own SHA-256")
    if not builtin:
        def missing(name: str) -> object:
            raise ImportError(name)

        monkeypatch.setattr(ids.importlib, "import_module", missing)
    ids._sha256.cache_clear()
    try:
        assert (ids._sha256() is not hashlib.sha256) == builtin
        assert ids.bearer_digest("writer-token-0123456789") == hashlib.sha256(b"writer-token-0123456789").digest()
        assert stable_claim_id("p", "a", "h", 1) == (
            "claim_2c71563000087d5d8407f1b6c34e5f2ab5aabce8efe33cdf2d78cbcc0de09040")
    finally:
        ids._sha256.cache_clear()
