"""The reproduction record, its script and its replay runner on small hand-made records.

The pure part (templates, judging, reading a record) without I/O; then the one script writer and
the one runner against an in-process reference served on loopback, with given tokens: the same
record gives the same exit status from both (1 the bug shows, 0 it does not, 2 cannot run, 3 a
race not met), values are bound from earlier answers, and no token reaches the output.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import aidememo_ref
from aidememo_ref import serve_in_thread
from conformance.reproduction.record import (
    Answer,
    Answered,
    Field,
    Identity,
    RecordError,
    Reproduction,
    Scope,
    Step,
    TargetInfo,
    Unbound,
    Verdict,
    escape,
    judge_group,
    load_record,
    placeholders,
    render,
)
from conformance.reproduction.runner import replay
from conformance.reproduction.script import render_script

TOKEN = "tok-0123456789abcdef0123456789abcdef"


def test_literal_braces_survive_and_placeholders_are_named():
    text = '{"a":{"b":1}} {run} {{ {step1.body.x}'
    assert render(escape(text), Scope(run="R")) == text  # escaped, nothing is a placeholder
    assert placeholders("/p/{run}/x?e={step2.body.cursor.project_epoch}&t={token.writer}") == (
        "run", "step2.body.cursor.project_epoch", "token.writer")


def test_values_are_bound_from_earlier_answers_in_each_context():
    answers = {"step1": Answered(status=200, body=b'{"project_epoch":"01 E/\\"x","handoff":{"revision":3},"l":[5]}')}
    scope = Scope(run="r1", tokens={"w": "secret"}, answers=answers)
    assert render("/p/{run}?e={step1.body.project_epoch}", scope, "url") == "/p/r1?e=01%20E%2F%22x"  # one segment or value
    assert render('{"e":"{step1.body.project_epoch}","r":{step1.body.handoff.revision}}', scope, "json") == \
        '{"e":"01 E/\\"x","r":3}'
    assert render("{step1.body.l.0} {step1.body.l.#} {step1.status}", scope) == "5 1 200"
    with pytest.raises(Unbound, match="no 'nope'"):
        render("{step1.body.nope}", scope)
    with pytest.raises(Unbound, match="step2 has no answer"):
        render("{step2.status}", scope)


def _step(name: str, *expect: Answer, group: int | None = None) -> Step:
    return Step(name=name, method="GET", target="/x", expect=expect, group=group)


def test_a_group_holds_in_any_order_of_its_answers():
    won, lost = Answered(status=200), Answered(status=409, body=b'{"error":{"code":"stale_revision"}}')
    steps = [_step("step1", Answer(status=200), group=1), _step("step2", Answer(status=409, code="stale_revision"),
                                                                group=1)]
    assert judge_group(steps, [lost, won], Scope(run="r")) is None
    why = judge_group(steps, [won, won], Scope(run="r"))
    assert why is not None and "answered HTTP 200, HTTP 200" in why


def test_pinned_fields_read_templates_and_earlier_answers():
    scope = Scope(run="r9", answers={"step1": Answered(status=200, body=b'{"revision":4}')})
    answer = Answer(status=200, fields=(Field(path="id", equals="h-{run}"),
                                        Field(path="revision", equals="{step1.body.revision}")))
    assert answer.departure(Answered(status=200, body=b'{"id":"h-r9","revision":4}'), scope) is None
    assert answer.departure(Answered(status=200, body=b'{"id":"h-r9","revision":5}'), scope) == "revision is 5, not 4"
    assert answer.departure(Answered(status=200, body=b"not json"), scope) == "no field id"


def test_a_lease_length_is_pinned_as_a_distance_between_two_instants_the_server_chose():
    """The spec fixes a lease's length, not its instants: a shorter lease departs, a later one does not."""
    lease = Field(path="handoff.claim_expires_at_ms", minus="handoff.claim_heartbeat_at_ms", equals=120000)
    answer = Answer(status=200, fields=(lease,))
    scope = Scope(run="r")

    def body(beat: object, expires: object) -> bytes:
        return json.dumps({"handoff": {"claim_heartbeat_at_ms": beat, "claim_expires_at_ms": expires}}).encode()

    assert answer.departure(Answered(status=200, body=body(5, 120005)), scope) is None
    assert answer.departure(Answered(status=200, body=body(10**12, 10**12 + 120000)), scope) is None
    assert answer.departure(Answered(status=200, body=body(5, 60005)), scope) == (
        "handoff.claim_expires_at_ms - handoff.claim_heartbeat_at_ms is 60000, not 120000")
    assert answer.departure(Answered(status=200, body=body(5, None)), scope) is not None
    assert answer.departure(Answered(status=200, body=b'{"handoff": {}}'), scope) == (
        "no field handoff.claim_expires_at_ms or handoff.claim_heartbeat_at_ms")
    assert Field(**{**lease.to_json(), "equals": 120000}) == lease  # minus survives the record's JSON


def test_a_digest_field_pins_a_hash_of_its_filled_template():
    """A fingerprint's rule, not its value: the field holds when it is the SHA-256 of the template
    filled with this run's values, and says what was hashed when it is not."""
    import hashlib

    digest = Field(path="fingerprint", equals='{{"id":"n-{run}","n":{step1.body.revision}}', digest="sha256")
    scope = Scope(run="r9", answers={"step1": Answered(status=200, body=b'{"revision":4}')})
    right = hashlib.sha256('{"id":"n-r9","n":4}'.encode()).hexdigest()
    answer = Answer(status=200, fields=(digest,))
    assert answer.departure(Answered(status=200, body=json.dumps({"fingerprint": right}).encode()), scope) is None
    assert answer.departure(Answered(status=200, body=b'{"fingerprint":"ab"}'), scope) == (
        f'fingerprint is "ab", not "{right}" (the SHA-256 of {{"id":"n-r9","n":4}})')
    assert Field(**digest.to_json()) == digest  # the digest survives the record's JSON
    with pytest.raises(RecordError, match="digest is sha256, not 'md5'"):
        Field(path="fingerprint", equals="x", digest="md5")


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(format="other/1"), "not an aidememo-reproduction/1 record"),
    (lambda d: d["steps"][1].update(target="/x/{step3.status}"), "step2 reads step3.status, which is not an earlier"),
    (lambda d: d["steps"][0].update(headers=[["Authorization", "Bearer {token.nobody}"]]),
     "credential of 'nobody', an identity the record lacks"),
    (lambda d: d["steps"][0].update(expect=[{"status": "200"}]), "needs a status"),
    (lambda d: d["steps"][0].update(method="get"), "upper-case"),
])
def test_a_bad_record_is_refused_naming_what_is_wrong(change, message):
    data = _record(Verdict.SHOWN).to_json()
    change(data)
    with pytest.raises(RecordError, match=message):
        load_record(json.dumps(data))


def _record(want: Verdict, race: str = "") -> Reproduction:
    """Read the identity, then the change feed with the epoch it gave; the feed's answer is 200 on
    the reference, so expecting 409 shows "the bug", expecting 200 does not."""
    status = 409 if want is Verdict.SHOWN else 200
    auth = (("Authorization", "Bearer {token.writer}"),)
    steps = (Step(name="step1", method="GET", target="/v1/projects/p-{run}/identity", headers=auth,
                  expect=(Answer(status=200, fields=(Field(path="actor_id", equals="w-{run}"),)),)),
             Step(name="step2", method="GET", target="/v1/projects/p-{run}/identity", headers=auth, group=1),
             Step(name="step3", method="GET", target="/v1/projects/p-{run}/identity", headers=auth, group=1),
             Step(name="step4", method="GET", headers=auth,
                  target="/v1/projects/p-{run}/changes?project_epoch={step1.body.project_epoch}&after_seq=0",
                  expect=(Answer(status=status),)))
    return Reproduction(title="a hand-made record", origin="test", requirements=("AM-FEED-1",), steps=steps,
                        identities=(Identity(label="writer", given=True,
                                             values=(("tenant", "t-{run}"), ("project", "p-{run}"),
                                                     ("actor", "w-{run}"), ("role", "writer"))),),
                        race=race, tries=2)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ledger = aidememo_ref.ReferenceLedger(tmp_path_factory.mktemp("ref") / "ledger.sqlite",
                                          clock=aidememo_ref.OffsetClock(), test_clock=True)
    ledger.provision(tenant_id="t-fixed", project_id="p-fixed", actor_id="w-fixed", token=TOKEN, role="writer")
    with serve_in_thread(ledger) as url:
        yield url
    ledger.close()


def _script(record: Reproduction, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "case.sh"
    script.write_text(render_script(record))
    return subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("want", "race", "status"), [(Verdict.SHOWN, "", 1), (Verdict.NOT_SHOWN, "", 0),
                                                       (Verdict.NOT_SHOWN, "two reads at once.", 3)])
def test_the_script_and_the_runner_give_one_verdict(server, tmp_path, want, race, status):
    record = _record(want, race)
    env = {"BASE_URL": server, "RUN": "fixed", "TOKEN_WRITER": TOKEN}  # the fixed identity's namespace and token
    done = _script(record, tmp_path, env)
    assert done.returncode == status, done.stdout[-3000:] + done.stderr
    assert replay(record, environ=env).verdict == status
    assert TOKEN not in done.stdout + done.stderr and TOKEN not in render_script(record)
    assert "step4 answered HTTP 200" in done.stdout, "the feed read took the epoch the identity read gave"
    if race:
        assert render_script(record).splitlines()[1].startswith("# RACE, NOT FORCED: two reads at once.")
        assert done.stdout.startswith("RACE, NOT FORCED") and "did not show in 2 tries" in done.stdout


def test_a_script_that_cannot_run_says_why_and_exits_2(server, tmp_path):
    record = _record(Verdict.SHOWN)
    assert _script(record, tmp_path, {"RUN": "fixed", "TOKEN_WRITER": TOKEN}).returncode == 2  # no BASE_URL
    done = _script(record, tmp_path, {"BASE_URL": server, "RUN": "fixed"})
    assert done.returncode == 2 and "set TOKEN_FILE_WRITER" in done.stdout, done.stdout
    assert replay(record, environ={"BASE_URL": server}).verdict is Verdict.CANNOT_RUN
    empty = Reproduction(title="nothing", origin="test")
    assert _script(empty, tmp_path, {}).returncode == 2 and replay(empty, environ={}).verdict is Verdict.CANNOT_RUN
    assert render_script(empty).splitlines()[1] == "# CANNOT RUN: the record has no steps to send. It exits 2."


def test_an_engine_that_crashes_cannot_run_rather_than_accuse(server, tmp_path):
    """Python exits 1 on an uncaught exception, the very status that says "the bug shows": a script
    whose engine fails must exit 2 and say so, whatever the server answered."""
    text = render_script(_record(Verdict.NOT_SHOWN))
    broken = text.replace("    why = judge_group(batch, answers, scope)\n", "    why = 1 // 0\n", 1)
    assert broken != text
    script = tmp_path / "case.sh"
    script.write_text(broken)
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "BASE_URL": server, "RUN": "fixed", "TOKEN_WRITER": TOKEN})
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr
    assert "the reproduction engine failed (ZeroDivisionError" in done.stdout
    assert "the bug shows" not in done.stdout


def _entry(method: str, url: str, answer: dict, *, body: str = "", expected: str = "", group: int | None = None):
    entry = {"kind": "http", "method": method, "url": "http://h:1" + url, "status": 200, "expected": expected,
             "replay_headers": [["Authorization", "Bearer <redacted:writer>"], ["Host", "h"]],
             "response_body": json.dumps(answer), **({"request_body_exact": body, "request_body": body} if body else {})}
    return {**entry, **({"group": group} if group is not None else {})}


def test_a_transcript_becomes_a_record_with_server_values_bound_and_minted_ids_rebased():
    from conformance.registry import Level
    from conformance.reproduction.suite import ReplayTarget, from_verdict
    from conformance.verdicts import Verdict as Read, VerdictRecord

    epoch = "01M98DBKFRVJTEN9VK1782H6T0"
    transcript = (
        _entry("GET", "/v1/projects/p-ab12cd34-1/identity", {"project_epoch": epoch}, expected="HTTP 200 (set-up)"),
        _entry("POST", "/v1/projects/p-ab12cd34-1/handoffs/h-ab12cd34-2/accept", {"revision": 2},
               body='{"command_id":"c-ab12cd34-3","expected_revision":1}', group=7),
        _entry("POST", "/v1/projects/p-ab12cd34-1/handoffs/h-ab12cd34-2/accept", {"revision": 2},
               body='{"command_id":"c-ab12cd34-4","expected_revision":1}', group=7),
        _entry("GET", f"/v1/projects/p-ab12cd34-1/changes?project_epoch={epoch}&after_seq=0", {},
               expected="HTTP 409 stale_revision with prose after it"),
        _entry("POST", "/v1/projects/p-ab12cd34-1/handoffs/h-ab12cd34-2/return", {},
               body='{"command_id":"c-ab12cd34-5","expected_revision":2}'),
    )
    ids = {i: "ab12cd34" for i in ("t-ab12cd34", "w-ab12cd34-9", "p-ab12cd34-1", "h-ab12cd34-2", "c-ab12cd34-3",
                                   "c-ab12cd34-4", "c-ab12cd34-5")}
    record = VerdictRecord(nodeid="t.py::test_x", requirement="AM-X-1", level=Level.MUST, capability="core",
                           verdict=Read.FAIL, reason="it failed", transcript=transcript, namespace="ab12cd34", ids=ids,
                           identities={"writer": {"tenant": "t-ab12cd34", "project": "p-ab12cd34-1",
                                                  "actor": "w-ab12cd34-9", "role": "writer"}})
    repro = from_verdict(record, ReplayTarget(url="http://h:1", templates=(("", "make {project} {token_file}"),)))
    first, raced, other, feed, back = repro.steps
    assert first.target == "/v1/projects/p-{run}-1/identity" and first.headers == (("Authorization",
                                                                                      "Bearer {token.writer}"),)
    assert feed.target == "/v1/projects/p-{run}-1/changes?project_epoch={step1.body.project_epoch}&after_seq=0"
    assert back.body == '{"command_id":"c-{run}-5","expected_revision":{step3.body.revision}}'
    assert raced.body == '{"command_id":"c-{run}-3","expected_revision":1}'  # 1 came from no answer: the check's own
    assert (raced.group, other.group) == (7, 7) and repro.race and repro.tries > 1
    assert [a.describe() for s in (first, feed) for a in s.expect] == ["HTTP 200", "HTTP 409"]
    assert repro.identities[0].values == (("tenant", "t-{run}"), ("project", "p-{run}-1"), ("actor", "w-{run}-9"),
                                          ("role", "writer")) and not repro.identities[0].given
    assert load_record(repro.dumps()) == repro


def test_a_bound_identity_is_made_by_the_bound_template(tmp_path):
    # A token bound to a source (bind_source) comes from the target's bound template, in the script and
    # the runner alike; before, both made it with the general template, an unbound token, and a binding
    # check's script then showed "the bug" on a correct server too.
    made = tmp_path / "made"
    made.mkdir()
    target = TargetInfo(url="http://127.0.0.1:9", provision=f"cp {{token_file}} {made}/plain-{{actor}}",
                        keyed=(("bind_source", f"cp {{token_file}} {made}/bound-{{bind_source}}-{{actor}}"),))
    people = (Identity(label="plain", values=(("actor", "a-{run}"),)),
              Identity(label="gate", values=(("actor", "g-{run}"), ("bind_source", "src"), ("bind_actor", "g-{run}"))))
    record = Reproduction(title="bound", origin="test", identities=people, target=target,
                          steps=(Step(name="step1", method="GET", target="/health"),))
    assert load_record(record.dumps()) == record
    script = render_script(record)
    assert f"{made}/bound-src-g-" in script and f"{made}/plain-a-" in script
    # The runner makes identities with the templates its caller hands it, never the record's own.
    none = replay(record, environ={"RUN": "r0"})
    assert none.verdict is Verdict.CANNOT_RUN and "TOKEN_FILE_PLAIN" in none.why and not list(made.iterdir()), none
    templates = (("bind_source", target.keyed[0][1]), ("", target.provision or ""))
    assert replay(record, environ={"RUN": "r1"}, templates=templates).verdict is Verdict.CANNOT_RUN  # port 9: nobody
    assert sorted(p.name for p in made.iterdir()) == ["bound-src-g-r1", "plain-a-r1"]


def test_a_lane_is_sent_in_order_and_each_of_its_steps_judged_by_its_own_answer():
    # A write, then its read-back in one lane, while another write is in flight (AM-RACE-3): the
    # read's answer is its own, never paired with another contender's as a group's answers are.
    steps = (_step("step1", Answer(status=200), group=1), _step("step2", Answer(status=404), group=1),
             _step("step3", Answer(status=200), group=1))
    steps = (steps[0], dataclasses.replace(steps[1], lane=0), dataclasses.replace(steps[2], lane=0))
    assert [[s.name for s in lane] for lane in Reproduction.lanes(steps)] == [["step1"], ["step2", "step3"]]
    ok, missing = Answered(status=200), Answered(status=404)
    assert judge_group(steps, [ok, missing, ok], Scope(run="r")) is None
    why = judge_group(steps, [missing, ok, ok], Scope(run="r"))  # in any order these would pair up
    assert why is not None and why.startswith("step2 (sent in its group, after its lane's steps before it)"), why
    record = Reproduction(title="t", origin="test", steps=steps, race="a group")
    assert load_record(record.dumps()).steps == steps


_FAKE_CLI = '''
import json, os, secrets, sys
store, verb, rest = sys.argv[2], sys.argv[3], sys.argv[4:]
if verb == "new":  # mints an id the next step must be given, as a CLI's session or handoff ids are
    made = "id-" + secrets.token_hex(8) + os.environ.get("SUFFIX", "")
    open(store, "a").write(made + "\\n")
    print(json.dumps({"id": made, "stdin": sys.stdin.read()}))
else:  # "show ID": exit 0 when the store holds it; BROKEN answers 0 whatever it is given
    known = open(store).read().split() if os.path.exists(store) else []
    sys.exit(0 if rest[0] in known or os.environ.get("BROKEN") else 1)
'''


def _commands(tmp_path: Path) -> Reproduction:
    """A CLI target's record: make an id in the run's store (stdin and a variable given), show it,
    then show one that does not exist, which a correct CLI refuses (exit 1)."""
    fake = tmp_path / "fake.py"
    fake.write_text(_FAKE_CLI)
    store = "{dir}/store-{run}.txt"
    steps = (Step(name="step1", method="EXEC", target="", argv=("--store", store, "new"), env=(("SUFFIX", "-{run}"),),
                  body="in {run}", expect=(Answer(exit=0, fields=(Field(path="stdin", equals="in {run}"),)),)),
             Step(name="step2", method="EXEC", target="", argv=("--store", store, "show", "{step1.body.id}"),
                  expect=(Answer(exit=0),)),
             Step(name="step3", method="EXEC", target="", argv=("--store", store, "show", "id-absent"),
                  expect=(Answer(exit=1),)))
    return Reproduction(title="a CLI's record", origin="test", steps=steps,
                        target=TargetInfo(cli=f"{sys.executable} {fake}"))


def test_a_command_step_runs_the_cli_in_a_fresh_directory_and_binds_what_it_printed(tmp_path):
    record = _commands(tmp_path)
    assert load_record(record.dumps()) == record
    for env, status in (({}, 0), ({"BROKEN": "1"}, 1)):
        done = _script(record, tmp_path, env)
        assert done.returncode == status, done.stdout[-3000:] + done.stderr
        assert replay(record, environ={**os.environ, **env, "CLI": record.target.cli or ""}).verdict == status
    assert "THE BUG SHOWS: step3: exit 0, not exit 1" in done.stdout, done.stdout
    # The replay runner never runs the command line a record names (a file is data): CLI must.
    kept = replay(record, environ={k: v for k, v in os.environ.items() if k != "CLI"})
    assert kept.verdict is Verdict.CANNOT_RUN and "a record's is never run" in kept.why, kept
    assert "$CLI --store $DIR/store-r" in done.stdout  # the store lives in the script's own directory
    moved = _script(dataclasses.replace(record, target=TargetInfo()), tmp_path, {"CLI": record.target.cli or ""})
    assert moved.returncode == 0, moved.stdout  # CLI names the target when the record has none
    nowhere = _script(dataclasses.replace(record, target=TargetInfo()), tmp_path, {})
    assert nowhere.returncode == 2 and "set CLI" in nowhere.stdout
    with pytest.raises(RecordError, match="exit status"):
        Answer(status=200, exit=0)
    with pytest.raises(RecordError, match="a command step has argv words"):
        Step(name="step1", method="EXEC", target="/x", argv=("a",))


@pytest.mark.parametrize(("second", "status"), [(404, 0), (200, 1)])
def test_a_lanes_requests_go_in_one_curl_and_each_is_judged_by_its_own_answer(server, tmp_path, second, status):
    # One curl sends a lane's requests in a row (--next), so no process start falls between a write
    # and its read-back; each answer still lands in its own step's files and is judged as its own.
    auth = (("Authorization", "Bearer {token.writer}"),)
    steps = (Step(name="step1", method="GET", target="/v1/projects/p-{run}/identity", headers=auth, group=1,
                  lane=0, expect=(Answer(status=200, fields=(Field(path="actor_id", equals="w-{run}"),)),)),
             Step(name="step2", method="GET", target="/v1/projects/p-{run}/resources/custom.note/absent-{run}",
                  headers=auth, group=1, lane=0, expect=(Answer(status=second),)),
             Step(name="step3", method="GET", target="/v1/projects/p-{run}/identity", headers=auth, group=1,
                  expect=(Answer(status=200),)))
    record = Reproduction(title="a lane", origin="test", steps=steps, race="a lane beside a read.", tries=1,
                          identities=(Identity(label="writer", given=True,
                                               values=(("tenant", "t-{run}"), ("project", "p-{run}"),
                                                       ("actor", "w-{run}"), ("role", "writer"))),))
    assert render_script(record).count(" --next ") == 1
    env = {"BASE_URL": server, "RUN": "fixed", "TOKEN_WRITER": TOKEN}
    done = _script(record, tmp_path, env)
    assert done.returncode == (3 if status == 0 else 1), done.stdout[-3000:] + done.stderr
    assert "step2 answered HTTP 404" in done.stdout and "step1 answered HTTP 200" in done.stdout, done.stdout
    assert replay(record, environ=env).verdict == done.returncode


def _reproduce(tmp_path: Path, *words: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BASE_URL", "CLI", "AIDEMEMO_CONFIG", "AIDEMEMO_PROFILE")}
    return subprocess.run(["aidememo-conformance", "reproduce", *words], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)


def test_a_records_provisioning_command_is_never_run(server, tmp_path):
    """A record is data: ``reproduce`` makes identities with the target file its caller names (or
    the embedded reference's template), and a record naming another command cannot run (exit 2)
    rather than run it. Before, ``reproduce RECORD.json`` ran the record's ``target.provision``."""
    from tests.targetfile import write_target

    planted = TargetInfo(url=server, provision=f"touch {tmp_path}/planted-{{actor}}",
                         keyed=(("bind_source", f"touch {tmp_path}/planted-bound-{{actor}}"),))
    record = Reproduction(title="hostile", origin="test", target=planted,
                          identities=(Identity(label="writer", values=(("tenant", "t-{run}"), ("project", "p-{run}"),
                                                                       ("actor", "w-{run}"), ("role", "writer"))),),
                          steps=(Step(name="step1", method="GET", target="/health", expect=(Answer(status=200),)),))
    (tmp_path / "record.json").write_text(record.dumps())
    refused = _reproduce(tmp_path, "record.json")
    assert refused.returncode == 2 and "--config" in refused.stderr, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr and not list(tmp_path.glob("planted*"))
    # The caller's target file makes the identity: its command runs, the record's never does.
    write_target(tmp_path / "target.toml", server,
                 provision={"command": f"cp {{token_file}} {tmp_path}/made-{{tenant}}-{{project}}-{{actor}}-{{role}}"})
    done = _reproduce(tmp_path, "--config", "target.toml", "record.json")
    assert done.returncode == 0 and "the bug does not show" in done.stdout, done.stdout + done.stderr
    assert [p.name.endswith("-writer") for p in tmp_path.glob("made-t-r*-p-r*-w-r*")] == [True]
    assert not list(tmp_path.glob("planted*"))


@pytest.mark.parametrize(("status", "code"), [(200, 0), (404, 1)])
def test_reproduce_starts_the_target_files_server_and_provisions_there(tmp_path, status, code):
    """``reproduce --config`` of a ``[serve]`` target file starts that server for the replay (a
    fresh one: the replay makes its own identities), provisions with the file's command filled
    with its {port} and {dir}, and stops it: an identity read answers 200 only if the token the
    file's bootstrap made is the server's."""
    config = tmp_path / "served.toml"
    config.write_text((Path(__file__).parents[2] / "docs" / "examples" / "aidememo-ref-served.toml").read_text())
    who = Identity(label="writer", values=(("tenant", "t-{run}"), ("project", "p-{run}"), ("actor", "w-{run}"),
                                           ("role", "writer")))
    step = Step(name="step1", method="GET", target="/v1/projects/p-{run}/identity",
                headers=(("Authorization", "Bearer {token.writer}"),),
                expect=(Answer(status=status, fields=(Field(path="actor_id", equals="w-{run}"),) if status == 200
                               else ()),))
    record = Reproduction(title="served", origin="test", identities=(who,), steps=(step,),
                          target=TargetInfo(url="http://127.0.0.1:9", provision="gone {token_file}"))
    (tmp_path / "record.json").write_text(record.dumps())
    done = _reproduce(tmp_path, "--config", "served.toml", "record.json")
    assert done.returncode == code, done.stdout + done.stderr
    assert ("the bug shows" if code else "the bug does not show") in done.stdout
    assert "step1: HTTP 200, not 404" in done.stdout or code == 0, done.stdout  # the token was the server's


def _clock_runs(url: str) -> bool:
    import time

    import httpx

    first = httpx.get(f"{url}/__test__/clock").json()["now_ms"]
    time.sleep(0.05)
    return bool(httpx.get(f"{url}/__test__/clock").json()["now_ms"] > first)


@pytest.mark.parametrize("by", ["script", "runner"])
def test_a_run_that_stops_early_still_lets_a_held_clock_run(server, tmp_path, by):
    """AM-HL-HB-4 holds the test clock and lets it run again in a ``finally``; its replay stops at
    the step that shows the bug, before that release, which then left the target's clock standing
    still for up to 60 s. A cleanup step is sent, unjudged, whenever a run stops before it."""
    move = '{"advance_ms":0%s}'
    steps = (Step(name="step1", method="POST", target="/__test__/clock", body=move % ',"hold":true', json_body=True,
                  headers=(("Content-Type", "application/json"),), expect=(Answer(status=200),)),
             Step(name="step2", method="GET", target="/health", expect=(Answer(status=404),)),  # "the bug shows"
             Step(name="step3", method="POST", target="/__test__/clock", body=move % "", json_body=True,
                  headers=(("Content-Type", "application/json"),), expect=(Answer(status=200),), cleanup=True))
    record = Reproduction(title="held", origin="test", steps=steps)
    assert load_record(record.dumps()) == record and '"cleanup": true' in record.dumps()
    if by == "script":
        done = _script(record, tmp_path, {"BASE_URL": server})
        assert done.returncode == 1 and "step3: POST /__test__/clock (sent though the run stopped" in done.stdout, \
            done.stdout
    else:
        assert replay(record, base_url=server).verdict is Verdict.SHOWN
    assert _clock_runs(server), "the replay left the target's test clock held"
    uncleaned = dataclasses.replace(record, steps=(*steps[:2], dataclasses.replace(steps[2], cleanup=False)))
    assert replay(uncleaned, base_url=server).verdict is Verdict.SHOWN and not _clock_runs(server)  # the test bites
    assert replay(record, base_url=server).verdict is Verdict.SHOWN and _clock_runs(server)
