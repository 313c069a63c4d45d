"""A failure's standalone exports: a pytest file, and a reproduction record with its curl script.

Both send the plan again with fresh ids in a fresh project, never the ids or the project of the
recorded run. The pytest file calls ``simulations.replay`` (so it judges with the model). The
reproduction record (``conformance.reproduction``) is the plan as steps: the setup, then each
batch as one concurrency group, the clock moved between batches as a replay moves it, and
beside each operation the checker blamed the answers the model allowed it; its script (the one
writer's) and ``aidememo-conformance reproduce`` exit 1 when such an answer is none of them, and
3 when no try showed it (a network cannot force an interleaving). Neither holds or prints a
token: the pytest file asks the replay's target for one, the record provisions its own with the
target file's command (or reads the token files a user names).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from conformance.reproduction.record import Answer, Field, Identity, Reproduction, Step, TargetInfo, escape
from simulations.ledger import LEDGER, answer_parts, describe_answer
from simulations.plan import READER, Plan, PlannedOp, marked_run
from simulations.planner import setup_requests
from simulations.targets import SIM_TENANT, token_variable

__all__ = ["URL_TIMES", "finding_requirements", "pytest_text", "race_sentence", "reproduction_of"]

URL_TIMES = 5  # reruns of the exported test over a URL: the network interleaves, a race may need several
_RUN = "@RUN@"
_PROJECT = "@PROJECT@"
# A replay of an embedded finding needs a reference of its own (as the suite's embedded runs do).
_REPLAY_TEMPLATE = ("aidememo-ref bootstrap --database ./replay.sqlite --tenant-id {tenant} --project-id {project} "
                    "--actor-id {actor} --token-file {token_file} --role {role}")
_REPLAY_HINT = ("The run's embedded reference is gone: start one, `aidememo-ref serve --database ./replay.sqlite "
                "--test-clock` (127.0.0.1:3030), then BASE_URL=http://127.0.0.1:3030 sh this-script.")
# The requirement a finding breaks: by the receipt rule, or (for the ledger model) by the operation blamed.
_RULE_REQUIREMENTS = {"receipts": ("AM-RACE-1",), "change feed": ("AM-RACE-1",), "revision order": ("AM-RACE-2",)}
_OP_REQUIREMENTS = {"handoff.accept": "AM-HL-CAS-3", "handoff.heartbeat": "AM-HL-CAS-2",
                    "handoff.return": "AM-HL-CAS-2", "handoff.status": "AM-RACE-3", "handoff.send": "AM-CMD-2"}


_PYTEST_TEMPLATE = '''"""Regression test exported by aidememo-sim from a recorded race (seed {seed}).

It fails while the race is present. Run: pytest {name}
{where}"""

import json

import pytest

from simulations.replay import replay_target, reproduce

REPLAY = json.loads({doc!r})
TIMES = {times}


@pytest.fixture(scope="module")
def target():
    """Where the requests go (None: the embedded reference); a target that cannot be found is
    an error of the test's setup, never a failure."""
    return replay_target(REPLAY)


def test_race_seed_{seed}_does_not_reproduce(target):
    for _ in range(TIMES):
        result = reproduce(REPLAY, target)
        assert result.finding is None, result.finding.explanation
'''


def _target_words(doc: Mapping[str, Any]) -> str:
    """How the exported test reaches a URL target, in words (``replay_target`` does it)."""
    target = doc["target"]
    plan = Plan.from_json(doc["plan"])
    rate = doc.get("reproduction")
    lines = [
        f"The race was found over a URL ({target.get('url')}). The test sends the recorded requests again, up to",
        f"{URL_TIMES} times, each time with fresh ids in the target's project; the network interleaves them, so",
        "a race may need several runs" + (f" (the shrunk case reproduced {rate['reproduced']}/{rate['runs']})."
                                          if rate else "."),
        "The target: the target file AIDEMEMO_SIM_CONFIG names, provisioned afresh by its command",
    ]
    if target.get("config"):
        lines.append(f"(default: {target['config']}, the file the run used); run it where you ran aidememo-sim,")
        lines.append("since the file's provisioning command runs in the current directory.")
    else:
        variables = ", ".join(token_variable(a) for a in plan.identities)
        lines.append(f"or else BASE_URL (default {target.get('url')}), PROJECT (default {target.get('project')})")
        lines.append(f"and the tokens {variables}.")
    return "\n" + "\n".join(lines) + "\n"


def pytest_text(doc: Mapping[str, Any], name: str) -> str:
    """A standalone pytest file that fails while the recorded race reproduces."""
    slim = {k: doc[k] for k in ("format", "seed", "target", "plan", "schedule")}
    over_url = doc["target"].get("kind") == "url"
    return _PYTEST_TEMPLATE.format(seed=doc["seed"], name=name, doc=json.dumps(slim, sort_keys=True),
                                   times=URL_TIMES if over_url else 1, where=_target_words(doc) if over_url else "")


def finding_requirements(kind: str, blamed_ops: Sequence[str]) -> tuple[str, ...]:
    """The requirement ids a finding breaks: its receipt rule's, or those of the operations blamed."""
    if kind in _RULE_REQUIREMENTS:
        return _RULE_REQUIREMENTS[kind]
    return tuple(sorted({_OP_REQUIREMENTS.get(op, "AM-HL-CAS-2") for op in blamed_ops})) or ("AM-HL-CAS-2",)


def race_sentence(doc: Mapping[str, Any]) -> str:
    """What the race did, in one sentence (the blamed answer against what the model allowed); the
    recorded run's ids read RUN (a rerun makes its own)."""
    run_id = Plan.from_json(doc["plan"]).run_id
    return marked_run(_sentence(doc), run_id).replace(_RUN, "RUN")


def _sentence(doc: Mapping[str, Any]) -> str:
    finding = doc.get("finding") or {}
    history = doc.get("history", [])
    for index, allowed in finding.get("expected", []):
        if index < len(history):
            raw = history[index]
            op = raw["input"]
            got = "no answer" if raw.get("output") is None else describe_answer(raw["output"])
            return (f"{op.get('op')} by {op.get('actor')} was answered "
                    f"{got}, which no order of the concurrent requests allows (the model allowed "
                    f"{' or '.join(allowed)}).")
    first = str(finding.get("explanation", "")).split(":\n", 1)[0].strip()
    return (first[0].upper() + first[1:] + ".") if first else "The history has no order that the model allows."


def _blamed(doc: Mapping[str, Any]) -> dict[int, tuple[str, ...]]:
    """History index of each operation the checker blamed -> the answers the model allowed it."""
    finding = doc.get("finding") or {}
    return {int(index): tuple(answers) for index, answers in finding.get("expected", [])}


def _identity(op_input: Mapping[str, Any]) -> str:
    # Without the time: a rerun over a URL tells the model the server's time, not the plan's.
    # What the runner stamps on a recorded request (its clock readings) is not part of the request.
    stamped = ("request", "now_ms", "now_max_ms", "clock")
    return json.dumps({k: v for k, v in op_input.items() if k not in stamped}, sort_keys=True,
                      default=str)


def _describe(op: PlannedOp) -> str:
    return LEDGER.describe_operation(op.input, None).removesuffix(" -> unknown")


def _recorded(doc: Mapping[str, Any]) -> dict[tuple[int, str], tuple[int, str | None]]:
    """(worker, request) -> its index in the recorded history and the answer it had there (a
    request sent twice alike by one worker is named by its first)."""
    out: dict[tuple[int, str], tuple[int, str | None]] = {}
    for index, raw in enumerate(doc.get("history", [])):
        answer = None if raw.get("output") is None else describe_answer(raw["output"])
        out.setdefault((int(raw["client"]), _identity(raw["input"])), (index, answer))
    return out


def _template(text: str, project: str) -> str:
    return escape(text).replace(_RUN, "{run}").replace(_PROJECT, project)


def _answers(allowed: Sequence[str]) -> tuple[Answer, ...]:
    """The model's answers as expected answers (a clock window's "a or b" allows either)."""
    out = []
    for text in (one for a in allowed for one in a.split(" or ")):
        parts = answer_parts(text)
        if parts is not None:
            status, code, revision = parts
            out.append(Answer(status=status, code=code,
                              fields=() if revision is None else (Field(path="revision", equals=revision),)))
    return tuple(out)


def reproduction_of(doc: Mapping[str, Any], template: str | None, workdir: str = "") -> Reproduction:
    """The replay document as a reproduction record (see the module docstring); ``template``: the
    target file's provisioning command (None: the embedded reference's bootstrap, or fixed tokens)."""
    recorded = Plan.from_json(doc["plan"])
    placed = recorded.rebased(_RUN, _PROJECT)
    target = doc["target"]
    over_url = target.get("kind") == "url"
    fixed = over_url and not template
    project = escape(str(target.get("project"))) if fixed else "sim-{run}"
    identities = tuple(Identity(label=actor, given=fixed,
                                values=(("tenant", SIM_TENANT), ("project", project), ("actor", actor),
                                        ("role", "reader" if actor == READER else "writer")))
                       for actor in recorded.identities)
    steps: list[Step] = []

    def add(actor: str, method: str, path: str, body: object, *, group: int | None = None,
            expect: tuple[Answer, ...] = (), note: str = "") -> None:
        headers: list[tuple[str, str]] = [("Authorization", f"Bearer {{token.{actor}}}")]
        text = None if body is None else _template(json.dumps(body, sort_keys=True), project)
        if text is not None:
            headers.append(("Content-Type", "application/json"))
        steps.append(Step(name=f"step{len(steps) + 1}", method=method, target=_template(path, project),
                          headers=tuple(headers), body=text, json_body=text is not None, group=group, expect=expect,
                          note=note))

    for actor, path, body, what in setup_requests(_PROJECT, recorded.actors, _RUN):
        add(actor, "POST", path, body, expect=(Answer(status=200),), note=f"setup: {actor} {what}")
    blamed, history = _blamed(doc), _recorded(doc)
    previous: int | None = None
    for number, (batch, original) in enumerate(zip(placed.batches, recorded.batches)):
        if batch.clock_ms is not None:
            # As a replay does: each batch keeps its step from the one before on the server's clock.
            step_ms = 0 if previous is None else batch.clock_ms - previous
            previous = batch.clock_ms
            if step_ms > 0:
                add(recorded.actors[0], "POST", "/__test__/clock", {"advance_ms": step_ms}, note="move the clock")
        for op, then in zip(batch.ops, original.ops):
            index, _ = history.get((then.worker, _identity(then.input)), (None, None))
            add(op.actor, op.method, op.path, op.body, group=number if len(batch.ops) > 1 else None,
                expect=_answers(blamed.get(index, ())) if index is not None else (),
                note=f"#{index if index is not None else '?'} {_describe(op)}")
    ops = [str(doc["history"][i]["input"].get("op")) for i in blamed if i < len(doc.get("history", []))]
    finding = doc.get("finding") or {}
    return Reproduction(
        title=f"aidememo-sim race, seed {doc['seed']}", origin="simulator",
        requirements=finding_requirements(str(finding.get("kind", "")), ops), identities=identities,
        steps=tuple(steps), race=race_sentence(doc) if any(len(b.ops) > 1 for b in recorded.batches) else "",
        tries=URL_TIMES,
        target=TargetInfo(url=target.get("url") if over_url else None,
                          provision=template if over_url else _REPLAY_TEMPLATE, workdir=workdir,
                          credential_prefix="tok-", hint="" if over_url else _REPLAY_HINT),
        context=race_sentence(doc))
