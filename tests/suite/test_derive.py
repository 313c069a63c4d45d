"""The suite's own canonical JSON, fingerprint and derived ids, pinned by the spec's vectors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.profiles.aidememo.derive import bearer_digest_hex, canonical_json, command_fingerprint, stable_operation_id

# (fingerprint, canonical preimage) from aidememo-wire.md §7.2
VECTORS = [
    ("9413b2a5c2fb757a08ae01ef397c94a533a2fa8c4b63884006bd4e0a0f29e43f",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"a":{"b":3,"d":4},"z":2},'
     '"project_id":"project_http","resource":{"id":"note_http","kind":"custom.note"}}'),
    ("9579ee6e4ef8a66079d4155b2509757915be2819c4db481d86416b6b602083d9",
     '{"change":"delete","expected_revision":1,"operation":"resource.delete","payload":null,'
     '"project_id":"project_http","resource":{"id":"note_replica","kind":"custom.note"}}'),
    ("998cca127d5faec77190f8889d046b76a233321f6d806f0c4e6c4182008b6812",
     '{"change":"upsert","expected_revision":null,"operation":"handoff.send","payload":{"context_id":null,'
     '"done_when":null,"focus":"Keep pagination deterministic","handoff_id":"handoff_p2_second",'
     '"session_id":"session_remote","to_actor":"codex-p2"},"project_id":"project_http",'
     '"resource":{"id":"handoff_p2_second","kind":"handoff"}}'),
    ("c5be34a65183e8de99f6d5a3690524174320870cbadb5430e7bdbdab84d15b3c",
     '{"change":"upsert","expected_revision":1,"operation":"handoff.accept","payload":{"claim_id":"claim_p2"},'
     '"project_id":"project_http","resource":{"id":"handoff_p2","kind":"handoff"}}'),
    ("8659957daf16bb869592c8d35ec28f05e3ce7facf4b1dc9b5baf2d30b78e6e98",
     '{"change":"upsert","expected_revision":null,"operation":"resource.put","payload":{"content":"레디스 장애\\n복구",'
     '"list":[3,1],"n":1.5,"nested":{"a":null,"b":true}},"project_id":"p","resource":{"id":"n1","kind":"custom.note"}}'),
    ("b28e8ef850182b76843f0f8d00009e3e69e29a9d335d5052dfd5488fc3e38f13",
     '{"change":"upsert","expected_revision":7,"operation":"resource.put","payload":{},"project_id":"p",'
     '"resource":{"id":"n1","kind":"custom.note"}}'),
]


@pytest.mark.parametrize(("expected", "preimage"), VECTORS, ids=[v[0][:8] for v in VECTORS])
def test_fingerprint_vectors(expected, preimage):
    envelope = json.loads(preimage)
    assert canonical_json(envelope) == preimage
    got = command_fingerprint(project_id=envelope["project_id"], expected_revision=envelope["expected_revision"],
                              operation=envelope["operation"], payload=envelope["payload"],
                              resource_kind=envelope["resource"]["kind"], resource_id=envelope["resource"]["id"],
                              change=envelope["change"])
    assert got == expected


@pytest.mark.parametrize(("prefix", "parts", "expected"), [
    ("command_accept", ["project", "actor", "handoff"],
     "command_accept_3e292a68dda101e5eb31cea2af4b30935898bc1d2b886366684bfa3b7a1e77e7"),
    ("command_accept", ["ab", "c"], "command_accept_e6269794b1d56aa1c418d8df8da42ec658ae97d5dbf26659884245a7a0831da9"),
    ("command_accept", ["a", "bc"], "command_accept_b26f92dc64a358379f05cc5d24480a0255c1f481242bc26bea20a3a424b39fec"),
    ("claim", [], "claim_022763871284924c24827b71a2eebd1910ab49a59b4caecac35cb072958c1616"),
    ("claim", ["p", "a", "h", "1"], "claim_2c71563000087d5d8407f1b6c34e5f2ab5aabce8efe33cdf2d78cbcc0de09040"),
])
def test_stable_operation_id_vectors(prefix, parts, expected):
    assert stable_operation_id(prefix, parts) == expected


def test_bearer_digest_vector():
    assert bearer_digest_hex("writer-token-0123456789") == (
        "1caf5ddb6778770019772a6363b8cc194d1e3c145d8de3fc2570091710c3771e")


@pytest.mark.parametrize(("value", "text"), [
    (1e21, "1e+21"), (1.5e-7, "1.5e-7"), (0.00001, "0.00001"), (1e17, "1e+17"), (-0.0, "-0.0"), (2.0, "2.0"),
    (1e15, "1000000000000000.0"), (123.456, "123.456"), (2**64, "1.8446744073709552e+19"), (-(2**63) - 1,
                                                                                            "-9.223372036854776e+18"),
])
def test_serde_number_text(value, text):
    assert canonical_json(value) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_agrees_with_the_reference_canonical_json(value):
    # Two implementations written apart; disagreement means one of them departs from §7.2.
    # Integers outside i64::MIN..=u64::MAX are left out: serde_json parses them as f64 (ERRATA 1) and the
    # reference keeps them exact, a difference reported to the reference's owner.
    from aidememo_ref import canonical_json as reference

    assert canonical_json(value) == reference(value)
