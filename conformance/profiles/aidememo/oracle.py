"""What a correct server answers to a reproduction's steps: the reference's own answers.

``expect`` runs a reproduction record once against a private in-process reference (a fresh
SQLite file, the test clock on), its identities provisioned there in a namespace of its own,
and writes each answer beside its step: the status, the error code and every field the spec
pins. Fields the spec leaves to the implementation are not pinned (the rules of
``implementation_defined.py``, by key: epochs, times, messages, scores, prose), nor values that
depend on the run (``RUN_BOUND_KEYS``), and values holding the namespace are written back as
``{run}``. A lease's length is pinned (``Field.minus``): the spec fixes it, though not its two
instants. A receipt's fingerprint is pinned by its rule (``Field.digest``): the §7.2 preimage of
the step's request, its namespace written back as ``{run}``, which the script hashes; only when
the kit's own §7.2 code (``derive``) gives the reference's value, and no string of the request
came from an earlier answer (which another run may answer otherwise).

A group of requests sent at once is answered in an order the server chooses, so a record with
groups is run once per rotation of its largest group (each group's requests sent one by one, in
that rotation, on a fresh reference), and only what no rotation changes is pinned. After a
group, a step pins the fields every rotation answered alike. A group's own steps are paired
with its answers in any order (``record.judge_group``), so they pin values whose multiset over
the group, taken together, is the same in every rotation: fields that move between contenders
with the order (revisions, ``project_seq`` of commits to one resource) before fields each
contender keeps (its actor, its command id), as many as stay jointly unchanged. Rotations are a
sample of the orders a server may choose, not all of them: a value only some other order would
change is pinned.

The reference is the executable spec here, as it is for ``diff``; a step the reference could
not be sent (a template without a value) and every step after it keep the check's own
expectations.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

import aidememo_ref
from refkit.jsonvalue import loads
from conformance.profiles.aidememo.derive import canonical_json
from conformance.profiles.aidememo.implementation_defined import open_key
from conformance.profiles.aidememo.routes import RAW, TYPED_WRITES
from conformance.reproduction.record import (
    JSON,
    Answer,
    Answered,
    Field,
    RecordError,
    Reproduction,
    Scope,
    Step,
    Unbound,
    escape,
    placeholders,
    render,
    resolve,
)
from conformance.reproduction.runner import Send, send_steps

__all__ = ["RUN_BOUND_KEYS", "expect"]

# Beyond what the spec leaves open: values that differ from one run to the next on any one server:
# fingerprints and etags are hashes over ids that hold the run's namespace, and durations or
# instants (``*_ms``, ``*_at``) depend on the moment the step is sent.
RUN_BOUND_KEYS = frozenset({"fingerprint", "etag"})
_RUN_BOUND_SUFFIXES = ("_ms", "_at")
_MOST_FIELDS = 400  # beyond this an answer pins its status, code and list lengths only


def _volatile(key: str) -> bool:
    return open_key(key) or key in RUN_BOUND_KEYS or key.endswith(_RUN_BOUND_SUFFIXES)


def _pinned(value: JSON, path: str, run: str, out: list[Field]) -> None:
    if isinstance(value, dict):
        beat, expires = value.get("claim_heartbeat_at_ms"), value.get("claim_expires_at_ms")
        if type(beat) is int and type(expires) is int:  # a lease's length is the spec's (the TIME rule)
            at = f"{path}." if path else ""
            out.append(Field(path=f"{at}claim_expires_at_ms", minus=f"{at}claim_heartbeat_at_ms",
                             equals=expires - beat))
        for key, item in value.items():
            if key == "content" and "structuredContent" in value and isinstance(item, list):
                # An MCP tool result's text is its structuredContent written out (W §1.18), which is
                # pinned field by field: as one string it would pin what the rules leave open (an
                # instant, a fingerprint, a message).
                item = [{k: v for k, v in part.items() if k != "text"} if isinstance(part, dict) else part
                        for part in item]
            if not _volatile(key) and key.replace("_", "").replace("-", "").isalnum():
                _pinned(item, f"{path}.{key}" if path else key, run, out)
    elif isinstance(value, list):
        out.append(Field(path=f"{path}.#" if path else "#", equals=len(value)))
        for index, item in enumerate(value):
            _pinned(item, f"{path}.{index}" if path else str(index), run, out)
    elif isinstance(value, str):
        out.append(Field(path=path, equals=escape(value).replace(run, "{run}") if run in value else escape(value)))
    else:
        out.append(Field(path=path, equals=value))


def _envelope(target: str, request: JSON) -> dict[str, JSON] | None:
    """The §7.2 envelope of a write sent to ``target`` (path and query) with body ``request`` (None:
    not a write route the kit knows, or a body of another shape)."""
    if not isinstance(request, dict):
        return None
    path = urlsplit(target).path
    if path == RAW.path:
        resource = request.get("resource")
        if not isinstance(resource, dict):
            return None
        return {"project_id": request.get("project_id"), "expected_revision": request.get("expected_revision"),
                "operation": request.get("operation"), "payload": request.get("payload"),
                "resource": {"kind": resource.get("kind"), "id": resource.get("id")}, "change": request.get("change")}
    segments = path.split("/")  # "", "v1", "projects", PROJECT, route...
    if segments[:3] != ["", "v1", "projects"] or len(segments) < 5:
        return None
    rest = segments[4:]
    shape = rest if len(rest) == 1 else [rest[0], "{handoff_id}", *rest[2:]]
    route = next((r for r in TYPED_WRITES if r.path.split("/") == shape), None)
    payload = request.get("payload")
    if route is None or not isinstance(payload, dict):
        return None
    filled = {name: payload.get(name) for name in route.fields}  # every declared field, absent ones null
    resource_id = filled[route.resource_field] if route.resource_field else unquote(rest[1])
    return {"project_id": unquote(segments[3]),
            "expected_revision": request.get("expected_revision") if route.transition else None,
            "operation": route.operation, "payload": filled, "resource": {"kind": route.kind, "id": resource_id},
            "change": "upsert"}


def _fingerprint(step: Step, scope: Scope, got: Answered) -> Field | None:
    """The receipt's fingerprint pinned by its rule (see the module docstring), or None."""
    try:
        receipt = got.json()
        if not isinstance(receipt, dict) or not isinstance(receipt.get("fingerprint"), str) or step.body is None:
            return None
        target = render(step.target, scope, "url")
        body = render(step.body, scope, "json" if step.json_body else "text")
        bound = [resolve(name, scope) for name in (*placeholders(step.target), *placeholders(step.body))
                 if name.startswith("step")]
        request: JSON = loads(body)
    except (Unbound, ValueError):
        return None
    envelope = _envelope(target, request)
    try:
        preimage = canonical_json(envelope) if envelope is not None else ""
    except (TypeError, ValueError):
        return None  # a value JSON has no text for: nothing the script could hash either
    if not preimage or hashlib.sha256(preimage.encode("utf-8")).hexdigest() != receipt["fingerprint"]:
        return None  # a route or value the kit's §7.2 code does not cover as the reference does: left open
    if any(isinstance(value, str) and value in preimage for value in bound):
        return None  # it hashes a string an earlier answer gave, which another run may answer otherwise
    return Field(path="fingerprint", equals=escape(preimage).replace(scope.run, "{run}"), digest="sha256")


def _answer(got: Answered, run: str, fields: bool, fingerprint: Field | None = None) -> Answer:
    pinned: list[Field] = []
    if fields:
        try:
            _pinned(got.json(), "", run, pinned)
        except LookupError:
            pinned = []  # not JSON: status and code are what a correct answer is
    if len(pinned) > _MOST_FIELDS:
        pinned = [f for f in pinned if f.path.endswith("#")]
    if fields and fingerprint is not None:
        pinned.append(fingerprint)
    return Answer(status=got.status, code=got.error_code(), fields=tuple(pinned))


def _sender(client: httpx.Client) -> Send:
    def send(method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes | None) -> Answered:
        response = client.request(method, url, headers=list(headers), content=body)
        return Answered(status=response.status_code, headers=tuple(response.headers.items()), body=response.content)

    return send


def expect(repro: Reproduction) -> Reproduction:
    """``repro`` with the reference's answers as each step's expectation (see the module docstring)."""
    runs: list[tuple[str, dict[str, Answered]]] = []
    for order in _rotations(repro):
        run = f"o{secrets.token_hex(4)}"
        with tempfile.TemporaryDirectory(prefix="aidememo-oracle-") as tmp:
            ledger = aidememo_ref.ReferenceLedger(str(Path(tmp) / "oracle.sqlite"), clock=aidememo_ref.OffsetClock(),
                                                  test_clock=True)
            try:
                answers = _answers(ledger, order, run)
            finally:
                ledger.close()
        if answers is None:
            return repro  # identities the reference cannot make: the checks' own expectations stand
        runs.append((run, answers))
    steps = {step.name: step for step in repro.steps}
    for batch in repro.groups():
        seen = [[answers.get(step.name) for _, answers in runs] for step in batch]
        if any(got is None or got.status == 0 for each in seen for got in each):
            continue  # a step the reference could not be sent: the check's own expectation stands
        pinned = {step.name: [_keyed(got, run, _fingerprint(step, Scope(run=run, answers=answered), got))
                              for got, (run, answered) in zip(each, runs) if got is not None]
                  for step, each in zip(batch, seen)}
        # Alone, or in a lane of several (sent in order, judged by its own answer): what every run
        # answered alike. Contenders (lanes of one): what the group answered alike, taken together.
        lanes = Reproduction.lanes(batch)
        contenders = [lane[0] for lane in lanes if len(lane) == 1] if len(batch) > 1 else []
        if contenders:
            for step, answer in zip(contenders, _together([pinned[step.name] for step in contenders])):
                steps[step.name] = dataclasses.replace(step, expect=(answer,))
        for step in (step for lane in lanes for step in lane if step.name not in {c.name for c in contenders}):
            steps[step.name] = dataclasses.replace(step, expect=_alike(pinned[step.name]))
    return dataclasses.replace(repro, steps=tuple(steps[step.name] for step in repro.steps))


_Key = tuple[str, str | None]  # a pinned field's (path, minus); STATUS: the answer's status and code
STATUS: _Key = ("", None)


def _keyed(got: Answered, run: str, fingerprint: Field | None) -> dict[_Key, object]:
    answer = _answer(got, run, fields=True, fingerprint=fingerprint)
    keyed: dict[_Key, object] = {(f.path, f.minus): f for f in answer.fields}
    keyed[STATUS] = (answer.status, answer.code)
    return keyed


def _built(keyed: dict[_Key, object], keys: Sequence[_Key]) -> Answer:
    pair = keyed[STATUS]
    assert isinstance(pair, tuple), pair  # the (status, code) pair _keyed put there
    status, code = pair
    return Answer(status=status, code=code, fields=tuple(f for k in keys if k != STATUS and isinstance(
        f := keyed.get(k), Field)))


def _alike(runs: list[dict[_Key, object]]) -> tuple[Answer, ...]:
    """One step's answers: the fields every run answered alike, with each status and code a run
    answered (more than one when the order of a group before it decides the status)."""
    first, *others = runs
    keys = [k for k, f in first.items() if k != STATUS and all(other.get(k) == f for other in others)]
    return tuple(dict.fromkeys(_built(keyed, [STATUS, *keys]) for keyed in runs))


def _together(members: list[list[dict[_Key, object]]]) -> list[Answer]:
    """A group's answers, one per step from the first run: the fields whose values over the group,
    taken together, are the same multiset in every run (moving fields first, then kept ones)."""
    runs = len(members[0])
    keys = sorted({k for runs_of in members for keyed in runs_of for k in keyed if k != STATUS})
    kept = [k for k in keys if all(len({repr(keyed.get(k)) for keyed in runs_of}) == 1 for runs_of in members)]

    def invariant(chosen: list[_Key]) -> bool:
        bags = [Counter(tuple(repr(runs_of[r].get(k)) for k in chosen) for runs_of in members) for r in range(runs)]
        return all(bag == bags[0] for bag in bags[1:])

    chosen = [STATUS]
    if invariant(chosen):  # else not even the statuses: each step keeps the first run's status and code
        for key in [k for k in keys if k not in kept] + kept:
            if invariant([*chosen, key]):
                chosen.append(key)
    return [_built(runs_of[0], chosen) for runs_of in members]


def _rotations(repro: Reproduction) -> list[Reproduction]:
    """``repro`` with each group's steps sent one by one, its lanes in each rotation of the largest
    group's (a rotation that would send a step before one it reads is left out)."""
    widest = max((len(Reproduction.lanes(batch)) for batch in repro.groups()), default=1)
    orders = []
    for turn in range(widest):
        steps: list[Step] = []
        for batch in repro.groups():
            lanes = Reproduction.lanes(batch)
            shift = turn % len(lanes)
            steps += [dataclasses.replace(s, group=None, lane=None, expect=())
                      for lane in lanes[shift:] + lanes[:shift] for s in lane]
        try:
            orders.append(dataclasses.replace(repro, steps=tuple(steps)))
        except RecordError:
            continue
    return orders


def _answers(ledger: aidememo_ref.ReferenceLedger, repro: Reproduction, run: str) -> dict[str, Answered] | None:
    """The reference's answers to ``repro``'s steps (expectations cleared, groups sent one by one),
    its identities provisioned in namespace ``run`` (None: one it cannot make, an identity the
    bootstrap refuses or a binding it refuses)."""
    tokens = {}
    for who in repro.identities:
        values = who.filled(run)
        if not {"tenant", "project", "actor"} <= values.keys():
            return None
        token = f"tok-{secrets.token_hex(16)}"
        try:
            ledger.provision(tenant_id=values["tenant"], project_id=values["project"], actor_id=values["actor"],
                             token=token, role=values.get("role", "writer"))
            if "bind_source" in values:  # a token bound to a source and actor answers as such
                ledger.bind_token(token, values["bind_source"], values.get("bind_actor", values["actor"]))
        except (aidememo_ref.ProvisionError, aidememo_ref.BindingsError):
            return None
        tokens[who.label] = token
    with httpx.Client(transport=ledger.transport(), base_url="http://reference") as client:
        return send_steps(repro, base_url="http://reference", send=_sender(client), tokens=tokens, run=run)[1]
