"""A divergence as a reproduction record: its shrunk steps, judged by the reference's answers.

The episode's actors are the record's identities (provisioned from the target's template in a
fresh namespace), its identity read comes first, as in a run, and every step's ``$epoch`` is
bound to that read's ``project_epoch``; the episode's names (``$project``, ``$ns``...) become
``{run}`` names. What a correct server answers beside each step is the reference's own answer
(``oracle.expect``), so the record's script and ``aidememo-conformance reproduce`` exit 1 where
the target diverges. The token of ``bad`` is a word no server issued, so it is no credential.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.profiles.aidememo.diff.runner import Divergence
from conformance.profiles.aidememo.diff.steps import ACTORS, BAD_TOKEN, CLOCK_ROUTE, Step
from conformance.profiles.aidememo.oracle import expect
from conformance.reproduction.record import Identity, Reproduction
from conformance.reproduction.record import Step as ReproStep
from conformance.reproduction.record import escape
from conformance.reproduction.suite import ReplayTarget

__all__ = ["case_record"]

UNHELD = "unheld-token-of-nobody"
# Markers put in place of the episode's names before escaping, then swapped for placeholders.
_RUN, _EPOCH = "@@run@@", "@@epoch@@"
_NAMES = {"$tenant": f"t-{_RUN}", "$tenant3": f"t3-{_RUN}", "$project": f"p-{_RUN}", "$project2": f"p2-{_RUN}",
          "$project3": f"p3-{_RUN}", "$ns": _RUN, "$epoch": _EPOCH}
_TENANT_OF = {"$project": "$tenant", "$project2": "$tenant", "$project3": "$tenant3"}


def _template(text: str) -> str:
    return escape(text).replace(_RUN, "{run}").replace(_EPOCH, "{step1.body.project_epoch}")


def _fill(text: str) -> str:
    for name in ("$project3", "$project2", "$project", "$epoch", "$ns"):  # longest first, as an episode fills
        text = text.replace(name, _NAMES[name])
    return text


def _fill_json(data: Any) -> Any:
    if isinstance(data, str):
        return _NAMES[data] if data in _NAMES else data.replace("$ns", _RUN)
    if isinstance(data, list):
        return [_fill_json(item) for item in data]
    if isinstance(data, dict):
        return {key: _fill_json(value) for key, value in data.items()}
    return data


def _step(number: int, step: Step) -> ReproStep:
    headers = [(name, _template(value)) for name, value in step.headers if name != "authorization-scheme"]
    scheme = dict(step.headers).get("authorization-scheme", "Bearer")
    if step.route != CLOCK_ROUTE and (step.actor in ACTORS or step.actor == BAD_TOKEN):
        headers.append(("Authorization", f"{escape(scheme)} " + (UNHELD if step.actor == BAD_TOKEN
                                                                else f"{{token.{step.actor}}}")))
    body, is_json = None, False
    if step.raw_body is not None:
        body = escape(step.raw_body)
    elif step.body is not None:
        body, is_json = _template(json.dumps(_fill_json(step.body), ensure_ascii=False, separators=(",", ":"))), True
    if body is not None:
        headers.append(("Content-Type", "application/json"))
    target = _template(_fill(step.path) + (f"?{_fill(step.query)}" if step.query else ""))
    return ReproStep(name=f"step{number}", method=step.method, target=target, headers=tuple(headers), body=body,
                     json_body=is_json, note=f"{step.actor}: {step.note}" if step.note else step.actor)


def case_record(divergence: Divergence, target: ReplayTarget) -> Reproduction:
    """The reproduction of ``divergence`` against ``target`` (see the module docstring)."""
    last = divergence.outcome
    assert last.field is not None
    where, ours, theirs = last.field
    identities = tuple(Identity(label=label, values=(("tenant", _template(_NAMES[_TENANT_OF[project]])),
                                                     ("project", _template(_NAMES[project])), ("actor", label),
                                                     ("role", role)))
                       for label, (project, role) in ACTORS.items())
    read = ReproStep(name="step1", method="GET", target="/v1/projects/p-{run}/identity",
                     headers=(("Authorization", "Bearer {token.sender}"),), note="sender: the episode's identity read")
    steps = (read, *(_step(n, s) for n, s in enumerate(divergence.steps, start=2)))
    record = Reproduction(
        title=f"a divergence diff found on {last.step.route} ({len(divergence.steps)} steps, shrunk)",
        origin="diff", requirements=tuple(divergence.requirements), identities=identities, steps=steps,
        target=target.info(),
        context=f"The first difference, {where}, was {json.dumps(theirs, ensure_ascii=False)[:200]} from the "
                f"reference and {json.dumps(ours, ensure_ascii=False)[:200]} from the target.")
    return expect(record)
