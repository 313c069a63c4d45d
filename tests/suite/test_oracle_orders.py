"""What a reproduction's oracle pins around requests sent at once (``profiles/aidememo/oracle.py``).

A group is answered in an order the server chooses: the oracle pins only what every rotation of
it answers alike. Here four writers put one note at once: the revisions and ``project_seq`` they
get move between them with the order, so the group pins the pairs (a pairing of steps to answers
must find each pair), and not which writer got which. A server stamping ``project_seq`` out of
revision order (``late_stamp``) shows; any order of a correct server's answers holds. The oracle
of before pinned status and code alone after a group, so the script of such a race exited 3 even
when its answers showed the bug.
"""

from __future__ import annotations

import json

from conformance.profiles.aidememo.oracle import expect
from conformance.reproduction.record import Answered, Identity, Reproduction, Scope, Step, judge_group

WRITERS = ("a", "b", "c", "d")


def _put(name: str, writer: str, group: int) -> Step:
    body = ('{"command_id":"cmd-{run}-%s","project_id":"p-{run}","expected_revision":null,"operation":"resource.put",'
            '"payload":{"by":"%s"},"resource":{"kind":"custom.note","id":"note-{run}"},"change":"upsert"}' % (name, writer))
    return Step(name=name, method="POST", target="/v1/commands", body=body, json_body=True, group=group,
                headers=(("Authorization", f"Bearer {{token.{writer}}}"), ("Content-Type", "application/json")))


def _record() -> Reproduction:
    people = tuple(Identity(label=w, values=(("tenant", "t-{run}"), ("project", "p-{run}"), ("actor", f"{w}-{{run}}"),
                                             ("role", "writer"))) for w in WRITERS)
    steps = tuple(_put(f"step{n}", w, 1) for n, w in enumerate(WRITERS, start=1))
    return Reproduction(title="four puts of one note at once", origin="test", identities=people, steps=steps,
                        race="a group", tries=1)


def _answer(writer: str, revision: int, seq: int) -> Answered:
    body = {"command_id": "x", "tenant_id": "t-r1", "project_id": "p-r1", "actor_id": f"{writer}-r1",
            "project_seq": seq, "resource": {"kind": "custom.note", "id": "note-r1"}, "revision": revision,
            "committed_at_ms": 1}
    return Answered(status=200, body=json.dumps(body).encode())


def test_a_group_pins_what_every_order_answers_alike_and_not_who_won():
    steps = list(expect(_record()).steps)
    pinned = {f.path for f in steps[0].expect[0].fields}
    assert {"revision", "project_seq"} <= pinned and "actor_id" not in pinned, pinned
    scope = Scope(run="r1")
    # A correct server that served d, b, a, c in that order: each answer's pair moves with the order.
    served = [_answer(w, n, n) for n, w in enumerate(("d", "b", "a", "c"), start=1)]
    assert judge_group(steps, served, scope) is None
    # late_stamp: revision 2 was stamped before revision 1.
    stamped = [_answer("a", 1, 2), _answer("b", 2, 1), _answer("c", 3, 3), _answer("d", 4, 4)]
    why = judge_group(steps, stamped, scope)
    assert why is not None and "sent at once" in why, why
