"""One episode: fresh identities on both sides, then a sequence of steps sent to each and compared.

Every episode provisions the same actors on both sides (the target's through its template, so
fresh ids in a namespace of their own): ``sender``, ``receiver``, ``outsider`` and ``reader`` in
``$project``, ``other_project`` in a second project of the tenant, ``other_tenant`` in a project
of another tenant. ``anon`` sends no token; ``bad`` a token nobody holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.errors import Untestable
from conformance.profiles.aidememo.diff.compare import Answer, Departure, Departures, Normalizer
from conformance.profiles.aidememo.diff.steps import ACTORS, BAD_TOKEN, CLOCK_ROUTE, Step
from conformance.profiles.aidememo.diff.sides import Side, fresh_token
from refkit.jsonvalue import loads

__all__ = ["Episode", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one step got from both sides."""

    step: Step
    target: Answer
    reference: Answer
    reference_data: Any  # the reference's raw JSON, for the generator's model
    field: tuple[str, Any, Any] | None  # the first difference; None: the answers agree
    tolerated: Departure | None = None

    @property
    def diverged(self) -> bool:
        return self.field is not None and self.tolerated is None


@dataclass(slots=True)
class _Env:
    side: Side
    tokens: dict[str, str]
    values: dict[str, Any]  # placeholders: names, and each side's epoch as it answered it
    normalizer: Normalizer

    def fill(self, text: str) -> str:
        for name in ("$project3", "$project2", "$project", "$epoch", "$ns"):
            value = self.values[name]
            text = text.replace(name, value if isinstance(value, str) else json.dumps(value))
        return text

    def fill_json(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.values[data] if data in self.values else data.replace("$ns", self.values["$ns"])
        if isinstance(data, list):
            return [self.fill_json(item) for item in data]
        if isinstance(data, dict):
            return {key: self.fill_json(value) for key, value in data.items()}
        return data


@dataclass(slots=True)
class Episode:
    """Both sides, provisioned for one namespace."""

    target: Side
    reference: Side
    namespace: str
    departures: Departures
    envs: list[_Env] = field(default_factory=list)

    def start(self) -> None:
        """Provision every actor on both sides and read each side's epoch.

        Raises:
            Untestable: a side refused an identity or did not answer its identity read.
        """
        ns = self.namespace
        names = {"$tenant": f"t-{ns}", "$tenant3": f"t3-{ns}", "$project": f"p-{ns}", "$project2": f"p2-{ns}",
                 "$project3": f"p3-{ns}"}
        tenant_of = {"$project": "$tenant", "$project2": "$tenant", "$project3": "$tenant3"}
        for side in (self.target, self.reference):
            wanted = [({"tenant": names[tenant_of[project]], "project": names[project], "actor": label, "role": role},
                       fresh_token()) for label, (project, role) in ACTORS.items()]
            tokens = {BAD_TOKEN: fresh_token(), **dict(zip(ACTORS, side.provision_all(wanted)))}
            values = {**names, "$ns": ns}
            status, _, body = side.send("GET", f"/v1/projects/{names['$project']}/identity",
                                        [("Authorization", f"Bearer {tokens['sender']}")], b"")
            try:
                # Kept as the side answered it, a string or not: sent back as it came, so a target's
                # epoch of the wrong type shows as a divergence, not as a crash of the kit.
                values["$epoch"] = loads(body)["project_epoch"]
            except (ValueError, KeyError, TypeError):
                raise Untestable(f"the identity read after provisioning answered {status}") from None
            normalizer = Normalizer(names={value: key for key, value in names.items()}, namespace=ns)
            self.envs.append(_Env(side, tokens, values, normalizer))

    def send(self, step: Step) -> Outcome:
        answers: list[tuple[Answer, Any]] = []
        for env in self.envs:
            headers = [(name, value) for name, value in step.headers if name != "authorization-scheme"]
            scheme = dict(step.headers).get("authorization-scheme", "Bearer")
            if step.actor in env.tokens and step.route != CLOCK_ROUTE:
                headers.append(("Authorization", f"{scheme} {env.tokens[step.actor]}"))
            if step.raw_body is not None:
                body = step.raw_body.encode()
                headers.append(("Content-Type", "application/json"))
            elif step.body is not None:
                body = json.dumps(env.fill_json(step.body), ensure_ascii=False, separators=(",", ":")).encode()
                headers.append(("Content-Type", "application/json"))
            else:
                body = b""
            url = env.fill(step.path) + (f"?{env.fill(step.query)}" if step.query else "")
            status, got_headers, got_body = env.side.send(step.method, url, headers, body)
            try:
                data = loads(got_body) if got_body else None
            except ValueError:
                data = None
            answers.append((env.normalizer.answer(status, got_headers, got_body), data))
        (target, _), (reference, reference_data) = answers
        # the field named is the first one no departure of this step covers
        found, tolerated = self.departures.judge(step.route, step.query, target, reference)
        return Outcome(step, target, reference, reference_data, found, tolerated)

    def run(self, steps: list[Step], on_outcome: Callable[[Outcome], bool] | None = None) -> list[Outcome]:
        """Send ``steps`` in order; stop after the first divergence (or when ``on_outcome`` says so)."""
        outcomes = []
        for step in steps:
            outcome = self.send(step)
            outcomes.append(outcome)
            if outcome.diverged or (on_outcome is not None and not on_outcome(outcome)):
                break
        return outcomes
