"""Values the spec leaves to each server are not differences; everything else still is.

The rules live in ``conformance/profiles/aidememo/implementation_defined.py``; ``diff`` compares
through them and through the departures file, whose entries may name field paths. The episode
tests send steps to the embedded reference and to a target answering as upstream does
(``diff_targets.upstream_answers``: a member's huge ``before_seq`` is a 500, search scores differ
in their last digit), in process, so each verdict is one step's.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from conformance.errors import ConfigError
from conformance.profiles.aidememo import implementation_defined as rules
from conformance.profiles.aidememo.diff.compare import Departures, Normalizer, difference
from conformance.profiles.aidememo.diff.episode import Episode
from conformance.profiles.aidememo.diff.sides import ReferenceSide
from conformance.profiles.aidememo.diff.steps import P, Step

sys.path.insert(0, str(Path(__file__).parent))
import diff_targets  # noqa: E402  (loaded like --embedded-factory loads it)

JSON = [("content-type", "application/json")]


def _search(*hits: tuple[str, float], content: str = "redis cluster") -> bytes:
    results = [{"fact_id": f, "session_id": "s", "source_id": None, "actor_id": "w", "content": content,
                "score": score, "lexical_score": score} for f, score in hits]
    return json.dumps({"project_epoch": "E1", "index_seq": 4, "mode": "lexical", "semantic_model": None,
                       "results": results}).encode()


def _differ(target: bytes, reference: bytes, status: tuple[int, int] = (200, 200)) -> Any:
    return difference(Normalizer().answer(status[0], JSON, target), Normalizer().answer(status[1], JSON, reference))


def test_the_issues_score_is_no_divergence_but_other_fields_are() -> None:
    # issue 35: body.results[0].score: target 1.120833738777784, reference 1.1208337387777838
    target, reference = _search(("f1", 1.120833738777784)), _search(("f1", 1.1208337387777838))
    assert json.loads(target) != json.loads(reference), "the two answers do differ, in the score alone"
    assert _differ(target, reference) is None
    assert _differ(_search(("f1", 1.1), ("f2", 0.5)), _search(("f2", 1.1), ("f1", 0.5)))[0] == "body.results[0].fact_id"
    assert _differ(_search(("f1", 1.1)), _search(("f1", 1.1), ("f2", 0.5)))[0] == "body.results.length"
    changed = _differ(_search(("f1", 1.1), content="REDIS CLUSTER"), _search(("f1", 1.1)))
    assert changed == ("body.results[0].content", "REDIS CLUSTER", "redis cluster")


def test_scores_keep_their_presence_type_and_order() -> None:
    assert _differ(_search(("f1", 0.5), ("f2", 0.9)), _search(("f1", 0.9), ("f2", 0.5)))[0] == "body.results[0].score"
    missing = json.loads(_search(("f1", 0.5)))
    del missing["results"][0]["score"]
    assert _differ(json.dumps(missing).encode(), _search(("f1", 0.5)))[0].startswith("body.results[0].")
    text = json.loads(_search(("f1", 0.5)))
    text["results"][0]["score"] = "0.5"
    assert _differ(json.dumps(text).encode(), _search(("f1", 0.5))) is not None
    apart = json.loads(_search(("f1", 0.5)))
    apart["results"][0]["lexical_score"] = 0.25  # lexical mode: lexical_score == score (wire §1.6)
    assert _differ(json.dumps(apart).encode(), _search(("f1", 0.5)))[0] == "body.results[0].lexical_score"


def _record(beat: int, expires: int) -> bytes:
    return json.dumps({"revision": 2, "record": {"status": "accepted", "claim_heartbeat_at_ms": beat,
                                                  "claim_expires_at_ms": expires}}).encode()


def test_timestamps_epochs_and_messages_are_open_but_the_lease_and_the_401_body_are_not() -> None:
    assert _differ(_record(1_000, 121_000), _record(5_555, 125_555)) is None
    assert _differ(_record(1_000, 61_000), _record(5_555, 125_555))[0] == "body.record.claim_expires_at_ms"
    epochs = b'{"project_epoch":"A","cursor":{"project_epoch":"A"}}'
    assert _differ(epochs, b'{"project_epoch":"B","cursor":{"project_epoch":"B"}}') is None
    assert _differ(epochs, b'{"project_epoch":"B","cursor":{"project_epoch":"C"}}')[0] == "body.cursor.project_epoch"
    conflict = b'{"error":{"code":"handoff_conflict","message":"handoff conflict: %s"}}'
    assert _differ(conflict % b"one wording", conflict % b"another", (409, 409)) is None
    denied = b'{"error":{"code":"authentication_failed","message":"%s"}}'
    found = _differ(denied % b"no", denied % b"authentication failed", (401, 401))
    assert found == ("body.error.message", "no", "authentication failed"), "wire §4.1 fixes every 401's body"


def test_snapshots_compare_as_sets_and_the_gateways_prose_is_open() -> None:
    def snapshot(*ids: str) -> bytes:
        return json.dumps({"project_epoch": "E", "at_seq": 2, "resources": [
            {"resource": {"kind": "session", "id": i}, "revision": 1} for i in ids]}).encode()
    assert _differ(snapshot("a_b", "a.b"), snapshot("a.b", "a_b")) is None
    assert _differ(snapshot("a_b"), snapshot("a.b", "a_b")) is not None
    discover = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "instructions": "ours",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "aidememo-server", "version": "0.1.0"}}}
    theirs = {**discover, "instructions": "theirs",
              "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "aidememo-server", "version": "9.9"}}}
    assert _differ(json.dumps(discover).encode(), json.dumps(theirs).encode()) is None
    theirs["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] = "other"
    assert _differ(json.dumps(discover).encode(), json.dumps(theirs).encode())[0].endswith("serverInfo.name")


def test_each_rule_names_its_clause_once() -> None:
    names = [rule.name for rule in rules.RULES]
    assert len(names) == len(set(names))
    for rule in rules.RULES:
        assert "§" in rule.clause and rule.compared and rule.where, rule
    assert rules.comparable({"score": 1.0, "results": [{"score": 1.0}]}, rules.SCORE) == {
        "score": 1.0, "results": [{"score": "<score>"}]}


def _departures(tmp_path: Path, text: str) -> Departures:
    path = tmp_path / "departures.toml"
    path.write_text(text)
    return Departures.load(path)


def test_a_departure_may_name_field_paths(tmp_path: Path) -> None:
    departures = _departures(tmp_path, '[[departure]]\nfields = ["body.results[*].content"]\nreason = "ours shouts"\n')
    target = Normalizer().answer(200, JSON, _search(("f1", 0.5), content="LOUD"))
    reference = Normalizer().answer(200, JSON, _search(("f1", 0.5), content="loud"))
    route = f"GET {P}/search"
    found, tolerated = departures.judge(route, "q=loud", target, reference)
    assert found is not None and tolerated is not None and tolerated.reason == "ours shouts"
    assert departures.find(route, "q=loud", target, reference) is tolerated
    other = Normalizer().answer(200, JSON, _search(("f1", 0.5), ("f2", 0.1), content="LOUD"))
    found, tolerated = departures.judge(route, "q=loud", other, reference)
    assert tolerated is None and found is not None and found[0] == "body.results.length", (
        "a difference outside the named fields is still a divergence, and is the one named")
    assert departures.find(route, "q=loud", other, reference) is None


@pytest.mark.parametrize("text, message", [
    ('[[departure]]\nreason = "r"\n', "needs a string route, or fields"),
    ('[[departure]]\nroute = "GET /health"\nfields = "status"\nreason = "r"\n', "fields must be an array"),
    ('[[departure]]\nroute = "GET /health"\nfields = [""]\nreason = "r"\n', "fields must be an array"),
])
def test_a_malformed_fields_entry_is_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _departures(tmp_path, text)


def test_the_builtin_departure_tolerates_only_upstreams_status_and_code() -> None:
    builtin = Departures.load(None)
    route, query = f"GET {P}/handoffs", "box=inbox&before_seq=9223372036854775808"
    ours = Normalizer().answer(400, JSON, b'{"error":{"code":"invalid_command","message":"m"}}')
    upstream = Normalizer().answer(500, JSON, b'{"error":{"code":"storage_failure","message":"internal server error"}}')
    assert builtin.find(route, query, upstream, ours) is not None
    odd = Normalizer().answer(500, JSON, b'{"error":{"code":"storage_failure","message":"x"},"detail":"y"}')
    assert builtin.find(route, query, odd, ours) is None, "only status and code may differ"
    unauthenticated = Normalizer().answer(401, JSON, b'{"error":{"code":"authentication_failed","message":"m"}}')
    assert builtin.find(route, query, upstream, unauthenticated) is None


# -- episodes: the embedded reference against a target answering as upstream does -------------
class _LedgerSide(ReferenceSide):
    """A side around a ledger a ``diff_targets`` function built (in this process)."""

    def __init__(self, factory: Any) -> None:
        self._dir = tempfile.mkdtemp(prefix="aidememo-diff-target-")
        self.ledger = factory(str(Path(self._dir) / "ledger.sqlite"))


def _episode(factory: Any) -> Episode:
    episode = Episode(_LedgerSide(factory), ReferenceSide(), "ns1", Departures.load(None))
    episode.start()
    return episode


def _setup() -> list[Step]:
    session = {"command_id": "c-$ns-1", "payload": {"session_id": "s-$ns", "source_id": None, "topic": "t"}}
    steps = [Step("sender", "POST", f"POST {P}/sessions", "/v1/projects/$project/sessions", body=session)]
    for n, text in enumerate(("redis cluster timeout decision redis", "redis cache fallback", "cluster of caches")):
        fact = {"command_id": f"f-$ns-{n}", "payload": {"fact_id": f"f{n}-$ns", "session_id": "s-$ns", "content": text}}
        steps.append(Step("sender", "POST", f"POST {P}/facts", "/v1/projects/$project/facts", body=fact))
    return steps


def _mailbox(actor: str) -> Step:
    return Step(actor, "GET", f"GET {P}/handoffs", "/v1/projects/$project/handoffs",
                "box=inbox&include_completed=true&before_seq=9223372036854775808")


@pytest.fixture
def upstream() -> Any:
    episode = _episode(diff_targets.upstream_answers)
    yield episode
    for env in episode.envs:
        env.side.close()


def test_diff_does_not_accuse_a_server_answering_as_upstream(upstream: Episode) -> None:
    for step in _setup():
        assert not upstream.send(step).diverged
    for actor, status in (("anon", 401), ("bad", 401), ("other_project", 403), ("other_tenant", 403)):
        outcome = upstream.send(_mailbox(actor))
        assert (outcome.target.status, outcome.field) == (status, None), (actor, outcome)
    member = upstream.send(_mailbox("receiver"))
    assert (member.target.status, member.reference.status) == (500, 400)
    assert member.tolerated is not None and member.tolerated.reason.startswith("ERRATA 4") and not member.diverged
    search = upstream.send(Step("reader", "GET", f"GET {P}/search", "/v1/projects/$project/search", "q=redis%20cluster"))
    raw = [json.loads(env.side.send("GET", env.fill("/v1/projects/$project/search?q=redis%20cluster"),
                                    [("Authorization", f"Bearer {env.tokens['reader']}")], b"")[2])
           for env in upstream.envs]
    scores = [[hit["score"] for hit in body["results"]] for body in raw]
    assert len(scores[0]) == 3 and scores[0] != scores[1], "the target's scores differ from the reference's"
    assert search.field is None and not search.diverged, search


def test_diff_still_finds_a_difference_no_rule_leaves_open() -> None:
    episode = _episode(diff_targets.content_changed)
    try:
        for step in _setup():
            assert not episode.send(step).diverged
        search = episode.send(Step("reader", "GET", f"GET {P}/search", "/v1/projects/$project/search", "q=redis"))
        assert search.diverged and search.field is not None and search.field[0] == "body.results[0].content", search
    finally:
        for env in episode.envs:
            env.side.close()


def test_reproductions_leave_what_the_spec_leaves_open_unpinned() -> None:
    """The oracle pins a reproduction's expected answers through the same rules ``diff`` compares by:
    a search's scores (``lexical_score`` too: another server's float may differ in its last digit)
    and the project's epoch are never written as expectations, while the hit's content is."""
    from conformance.profiles.aidememo import oracle
    from conformance.reproduction.record import Identity, Reproduction, Step

    auth = (("Authorization", "Bearer {token.writer}"), ("Content-Type", "application/json"))
    repro = Reproduction(
        title="search", origin="suite",
        identities=(Identity(label="writer", values=(("tenant", "t{run}"), ("project", "p{run}"),
                                                      ("actor", "a{run}"), ("role", "writer"))),),
        steps=(Step(name="step1", method="POST", target="/v1/projects/p{run}/sessions", headers=auth, json_body=True,
                    body='{"command_id": "c1", "payload": {"session_id": "s1", "source_id": null, "topic": "t"}}'),
               Step(name="step2", method="POST", target="/v1/projects/p{run}/facts", headers=auth, json_body=True,
                    body='{"command_id": "c2", "payload": {"fact_id": "f1", "session_id": "s1", '
                         '"content": "alpha beta gamma"}}'),
               Step(name="step3", method="GET", target="/v1/projects/p{run}/search?q=alpha", headers=auth)))
    pinned = {f.path: f.equals for f in oracle.expect(repro).steps[2].expect[0].fields}
    assert pinned.get("results.0.content") == "alpha beta gamma", pinned
    assert not [p for p in pinned if p.rsplit(".", 1)[-1] in ("score", "lexical_score", "semantic_score",
                                                               "project_epoch", "committed_at_ms")], pinned


def test_reproductions_pin_a_fingerprint_by_its_rule_not_its_one_runs_value() -> None:
    """A fingerprint hashes ids in the run's namespace, so no value of one run can be pinned; the
    oracle pins §7.2's preimage instead (``Field.digest``), which the script fills with its own
    namespace and hashes. A rerun's correct fingerprint holds, the fingerprint_ascii variant's
    (non-ASCII escaped) departs; a preimage holding a string an earlier answer gave is not pinned."""
    import hashlib

    from conformance.profiles.aidememo import oracle
    from conformance.profiles.aidememo.derive import command_fingerprint
    from conformance.reproduction.record import Answer, Answered, Identity, Reproduction, Scope, Step

    auth = (("Authorization", "Bearer {token.writer}"), ("Content-Type", "application/json"))
    payload = {"content": "레디스 장애\n복구", "n": 1.5}

    def put(name: str, body: str) -> Step:
        return Step(name=name, method="POST", target="/v1/commands", headers=auth, json_body=True,
                    body='{"command_id":"c-{run}-' + name + '","project_id":"p{run}","operation":"resource.put",'
                         '"payload":' + body + ',"resource":{"kind":"custom.note","id":"n-{run}-' + name + '"},'
                         '"change":"upsert"}')

    repro = Reproduction(
        title="fingerprint", origin="suite",
        identities=(Identity(label="writer", values=(("tenant", "t{run}"), ("project", "p{run}"),
                                                      ("actor", "a{run}"), ("role", "writer"))),),
        steps=(put("step1", json.dumps(payload, ensure_ascii=False)),
               Step(name="step2", method="GET", target="/v1/projects/p{run}/identity", headers=auth),
               put("step3", '{"epoch":"{step2.body.project_epoch}"}')))
    expected = oracle.expect(repro)
    pinned = [f for f in expected.steps[0].expect[0].fields if f.path == "fingerprint"]
    assert [f.digest for f in pinned] == ["sha256"] and "{run}" in str(pinned[0].equals), pinned
    envelope = {"project_id": "pr2", "expected_revision": None, "operation": "resource.put", "payload": payload,
                "resource": {"kind": "custom.note", "id": "n-r2-step1"}, "change": "upsert"}
    right = command_fingerprint(**{**{k: v for k, v in envelope.items() if k not in ("resource", "change")},
                                   "resource_kind": "custom.note", "resource_id": "n-r2-step1"})
    escaped = hashlib.sha256(json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    answer, scope = Answer(status=200, fields=tuple(pinned)), Scope(run="r2")
    assert answer.departure(Answered(status=200, body=json.dumps({"fingerprint": right}).encode()), scope) is None
    why = answer.departure(Answered(status=200, body=json.dumps({"fingerprint": escaped}).encode()), scope)
    assert why is not None and why.startswith(f"fingerprint is \"{escaped}\", not \"{right}\" (the SHA-256 of "), why
    assert not [f for f in expected.steps[2].expect[0].fields if f.path == "fingerprint"]


def test_an_mcp_tool_results_text_is_not_pinned_beside_its_structured_content() -> None:
    """A tool result's text is its structuredContent written out (W §1.18): pinned as one string it
    held the receipt's committed_at_ms, so a rerun's script accused a correct server at that step.
    The structured fields stay pinned under the rules."""
    from conformance.profiles.aidememo import oracle
    from conformance.reproduction.record import Identity, Reproduction, Step

    headers = (("Authorization", "Bearer {token.writer}"), ("Content-Type", "application/json"),
               ("Mcp-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "session_create"))
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "session_create", "arguments": {"operation_id": "op-{run}", "session_id": "s-{run}",
                                                                "topic": "t"},
                       "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
    repro = Reproduction(
        title="mcp", origin="suite",
        identities=(Identity(label="writer", values=(("tenant", "t{run}"), ("project", "p{run}"),
                                                      ("actor", "a{run}"), ("role", "writer"))),),
        steps=(Step(name="step1", method="POST", target="/v1/projects/p{run}/mcp", headers=headers, json_body=True,
                    body=json.dumps(body)),))
    pinned = {f.path: f.equals for f in oracle.expect(repro).steps[0].expect[0].fields}
    assert pinned.get("result.structuredContent.resource.id") == "s-{run}" and "result.content.0.type" in pinned, pinned
    assert not [p for p in pinned if p.endswith((".text", "committed_at_ms"))], pinned
