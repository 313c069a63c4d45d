"""The shell script of a divergence: its shrunk steps, against the target, without the kit.

It is the suite's case-file script (``conformance.reports.replay``) fed a record made from the
divergence: the episode's actors are its identities (provisioned from the target's template in
a new namespace ``RUN``), its steps the transcript, each headed by what the reference answered,
and the last marked where the target diverged. The episode's identity read comes first, as in
a run, and its ``project_epoch`` fills ``$epoch``. The token of ``bad`` is a word no server
issued, so it is no credential.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.profiles.aidememo.diff.episode import Outcome
from conformance.profiles.aidememo.diff.runner import Divergence
from conformance.profiles.aidememo.diff.steps import ACTORS, BAD_TOKEN, CLOCK_ROUTE, Step
from conformance.registry import Level
from conformance.reports.replay import ReplayTarget, replay_script
from conformance.verdicts import Verdict, VerdictRecord

__all__ = ["case_script"]

NAMESPACE = "diffcase"  # rebased into the script's RUN wherever it appears
UNHELD = "unheld-token-of-nobody"
_NAMES = {"$tenant": "t-", "$tenant3": "t3-", "$project": "p-", "$project2": "p2-", "$project3": "p3-"}
_TENANT_OF = {"$project": "$tenant", "$project2": "$tenant", "$project3": "$tenant3"}


def _values() -> dict[str, str]:
    return {**{key: prefix + NAMESPACE for key, prefix in _NAMES.items()}, "$ns": NAMESPACE,
            "$epoch": "<captured:EPOCH>"}


def _fill(text: str, values: dict[str, str]) -> str:
    for name in ("$project3", "$project2", "$project", "$epoch", "$ns"):  # longest first, as an episode fills
        text = text.replace(name, values[name])
    return text


def _fill_json(data: Any, values: dict[str, str]) -> Any:
    if isinstance(data, str):
        return values[data] if data in values else data.replace("$ns", values["$ns"])
    if isinstance(data, list):
        return [_fill_json(item, values) for item in data]
    if isinstance(data, dict):
        return {key: _fill_json(value, values) for key, value in data.items()}
    return data


def _answer(outcome: Outcome, side: str) -> str:
    answer = outcome.reference if side == "reference" else outcome.target
    return f"HTTP {answer.status}" + (f" {answer.error_code}" if answer.error_code else "")


def _entry(step: Step, values: dict[str, str], expected: str, status: int) -> dict[str, object]:
    headers = [(name, value) for name, value in step.headers if name != "authorization-scheme"]
    scheme = dict(step.headers).get("authorization-scheme", "Bearer")
    if step.route != CLOCK_ROUTE and (step.actor in ACTORS or step.actor == BAD_TOKEN):
        token = UNHELD if step.actor == BAD_TOKEN else f"<redacted:{step.actor}>"
        headers.append(("Authorization", f"{scheme} {token}"))
    body = step.raw_body
    if body is None and step.body is not None:
        body = json.dumps(_fill_json(step.body, values), ensure_ascii=False, separators=(",", ":"))
    if body is not None:
        headers.append(("Content-Type", "application/json"))
    url = "<base-url>" + _fill(step.path, values) + (f"?{_fill(step.query, values)}" if step.query else "")
    return {"kind": "http", "method": step.method, "url": url, "replay_headers": [list(h) for h in headers],
            "request_body_exact": body, "request_body": body, "actor": step.actor, "expected": expected,
            "status": status}


def case_script(divergence: Divergence, target: ReplayTarget) -> str:
    """The script replaying ``divergence`` against ``target`` (see the module docstring)."""
    values = _values()
    identities = {label: {"tenant": values[_TENANT_OF[project]], "project": values[project], "actor": label,
                          "role": role} for label, (project, role) in ACTORS.items()}
    identity_read = {**_entry(Step("sender", "GET", "", "/v1/projects/$project/identity"), values,
                              "HTTP 200 (its project_epoch fills the steps' epoch)", 200), "capture": ["EPOCH", "project_epoch"]}
    transcript = [identity_read]
    for outcome in divergence.before:
        transcript.append(_entry(outcome.step, values, f"{_answer(outcome, 'reference')}, as the reference answered",
                                 outcome.target.status))
    last = divergence.outcome
    assert last.field is not None
    where, ours, theirs = last.field
    expected = (f"{_answer(last, 'reference')}, as the reference answered; the first difference, {where}, "
                f"was {json.dumps(theirs, ensure_ascii=False)} there and {json.dumps(ours, ensure_ascii=False)} "
                "from the target")
    transcript.append(_entry(last.step, values, expected, last.target.status))
    record = VerdictRecord(nodeid=f"diff {last.step.route}", requirement=", ".join(divergence.requirements),
                           level=Level.MUST, capability="", verdict=Verdict.FAIL, transcript=tuple(transcript),
                           failed_step=len(transcript) - 1, namespace=NAMESPACE, ids={NAMESPACE: NAMESPACE},
                           identities=identities)
    intro = (f"Replays a divergence diff found on {last.step.route} ({len(divergence.steps)} steps, shrunk; "
             f"requirements: {record.requirement or 'none mapped'}).",
             "It provisions the episode's actors in a new namespace RUN from the target's template, sends the",
             "steps there and says, before each answer, what the reference answered. Tokens stay in 0600",
             "files of a directory it makes and deletes; none is printed.")
    return replay_script(record, target, intro=intro, departed="the target diverged here")
