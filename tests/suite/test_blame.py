"""A bug in a check is never scored as the target failing (issue 21), in every profile.

Each profile runs two checks that both reach the target: one whose own code breaks after an
answered request (a misspelt actor, world method or dictionary key) must read ERROR, blamed on
the kit; one reading a field the answer lacks must read FAIL. For AideMemo the missing field is
a real departure, planted by a reference that leaves ``role`` out of its identity answers, and
the same check passes against the unbroken reference.
"""

from __future__ import annotations

import json

import pytest

from conformance import installed

pytest_plugins = ["pytester"]

DROP_ROLE = '''
import dataclasses
import json

import aidememo_ref


def identity_without_role(db_path):
    """A reference whose identity answers lack the promised ``role``."""
    ledger = aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)
    original = ledger.service.handle

    def handle(method, target, headers, body=b"", **options):
        response = original(method, target, headers, body, **options)
        path = target.decode("latin-1") if isinstance(target, bytes) else target
        if path.endswith("/identity") and response.status == 200:
            data = json.loads(response.body)
            data.pop("role", None)
            response = dataclasses.replace(response, body=json.dumps(data).encode())
        return response

    ledger.service.handle = handle
    return ledger
'''

AIDEMEMO_CHECKS = '''
import pytest
from conformance.profiles.aidememo.expect import expect_status

@pytest.mark.requirement("AM-ID-1")
def test_identity_names_the_role(world):
    project = world.project()
    body = expect_status(project.writer.identity(), 200)
    assert body["role"] == "writer", body

@pytest.mark.requirement("AM-ID-1")
def test_misspelt_actor(world):
    project = world.project()
    expect_status(project.writer.identity(), 200)
    project.wrtier.identity()

@pytest.mark.requirement("AM-ID-1")
def test_own_dictionary(world):
    project = world.project()
    expect_status(project.writer.identity(), 200)
    {"writer": 1}["reader"]
'''

XMEMO_CHECKS = '''
import pytest
from conformance.expect import expect_status

@pytest.mark.requirement("XM-CAP-1", clauses=("read-back",))
def test_missing_field(world):
    key = world.owner().key("writer")
    written = key.write("a durable fact")
    stored = expect_status(key.request("GET", f"/v1/memories/{written['id']}"), 200)
    stored["a_field_no_memory_has"]

@pytest.mark.requirement("XM-CAP-1", clauses=("read-back",))
def test_misspelt_method(world):
    key = world.owner().key("writer")
    key.write("a durable fact")
    key.wrtie("another")
'''

LOCAL_CHECKS = '''
import pytest
from conformance.profiles.aidememo_local.world import SOURCE

@pytest.mark.requirement("AML-CAS-1")
def test_missing_field(world):
    session = world.json("session", "new", "--source-id", SOURCE, "a topic")
    session["a_field_no_session_has"]

@pytest.mark.requirement("AML-CAS-1")
def test_misspelt_method(world):
    world.json("session", "new", "--source-id", SOURCE, "a topic")
    world.assignmnet()
'''


def _records(pytester: pytest.Pytester) -> dict[str, dict]:
    data = json.loads((pytester.path / "aidememo-report" / "results.json").read_text())
    return {r["nodeid"].rsplit("::", 1)[-1]: r for r in data["records"]}


def _verdicts(records: dict[str, dict]) -> dict[str, str]:
    return {name: record["verdict"] for name, record in records.items()}


def _kit_blamed(record: dict) -> None:
    assert record["verdict"] == "ERROR", record
    assert record["requests"] >= 1, "the target answered before the check broke: not a setup fault"
    assert "the check itself raised" in record["reason"] and "not a verdict on the target" in record["reason"]


def test_aidememo_blames_the_kit_for_its_own_bugs_and_the_server_for_a_missing_field(pytester):
    pytester.makepyfile(test_checks=AIDEMEMO_CHECKS, broken_identity=DROP_ROLE)
    pytester.runpytest_inprocess("-p", "no:cacheprovider")
    records = _records(pytester)
    assert _verdicts(records) == {"test_identity_names_the_role": "PASS", "test_misspelt_actor": "ERROR",
                                  "test_own_dictionary": "ERROR"}
    _kit_blamed(records["test_misspelt_actor"])
    assert "AttributeError: the project has no actor 'wrtier' (it has writer)" in records["test_misspelt_actor"]["reason"]
    _kit_blamed(records["test_own_dictionary"])

    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-embedded-factory",
                                 "broken_identity:identity_without_role", "-k", "role")
    failed = _records(pytester)["test_identity_names_the_role"]
    assert failed["verdict"] == "FAIL", failed
    assert "/identity answered 200: at $ the check expected the promised field 'role'" in failed["reason"]


def test_xmemo_blames_the_kit_for_its_own_bugs_and_the_server_for_a_missing_field(pytester):
    pytester.makepyfile(test_checks=XMEMO_CHECKS)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "xmemo")
    records = _records(pytester)
    assert _verdicts(records) == {"test_missing_field": "FAIL", "test_misspelt_method": "ERROR"}
    assert "the check expected the promised field 'a_field_no_memory_has'" in records["test_missing_field"]["reason"]
    _kit_blamed(records["test_misspelt_method"])


def test_aidememo_local_blames_the_kit_for_its_own_bugs_and_the_cli_for_a_missing_field(pytester):
    assert "aidememo-local" in installed.PROFILES
    pytester.makepyfile(test_checks=LOCAL_CHECKS)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-profile", "aidememo-local")
    records = _records(pytester)
    assert _verdicts(records) == {"test_missing_field": "FAIL", "test_misspelt_method": "ERROR"}
    assert "exited 0: at $ the check expected the promised field 'a_field_no_session_has'" in (
        records["test_missing_field"]["reason"])
    _kit_blamed(records["test_misspelt_method"])
