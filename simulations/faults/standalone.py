"""A fault finding as a reproduction record (``conformance.reproduction``), whose script needs no kit.

Only what a few requests and one crash can show is written as steps. The record makes a fresh
writer with the target file's template, sends one write, kills the server and starts it again
(the ``RESTART`` step: the script's ``SERVER_PID_FILE`` and ``RESTART_COMMAND``), and then:

* ``receipts survive restarts``: sends the identical write again; a correct server answers the
  stored receipt, the same sequence, revision, time and fingerprint;
* ``answered writes in the feed``: sends another write, and reads the change feed after the
  first one's sequence: its first entry is the second write, at the sequence its receipt gave
  (a server that lost its sequence head numbers it anew).

The campaign's own commands are not copied: they needed the races before them. The other rules
need the campaign's races around the fault (a lost answer in a race needs the race), and a
script cannot make them: their record says so and runs nothing (exit 2), naming the command
that replays the finding with its fault schedule.
"""

from __future__ import annotations

from conformance.reproduction.record import RESTART, Answer, Field, Identity, Reproduction, Step, TargetInfo
from simulations.plan import SOURCE
from simulations.targets import SIM_TENANT

__all__ = ["SCRIPTED_RULES", "fault_reproduction"]

SCRIPTED_RULES = frozenset({"receipts survive restarts", "answered writes in the feed"})
_ACTOR = "agent-a"
_PINNED = ("command_id", "project_seq", "revision", "committed_at_ms", "fingerprint")


def fault_reproduction(rule: str, requirements: tuple[str, ...], explanation: str, *, template: str | None,
                       workdir: str, replay: str) -> Reproduction:
    """The record of a finding of ``rule`` (see the module docstring); ``replay``: the kit's command."""
    context = f"{explanation}\nThe kit replays it with its fault schedule: {replay}"
    if rule not in SCRIPTED_RULES:
        return Reproduction(title=f"fault finding: {rule}", origin="simulator", requirements=requirements,
                            context=context,
                            unrunnable=f"this finding ({rule}) needs the campaign's races around its faults, which a "
                                       f"script cannot make; replay it with the kit: {replay}")
    auth = (("Authorization", f"Bearer {{token.{_ACTOR}}}"),)

    def write(name: str, session: str, expect: Answer, note: str) -> Step:
        body = (f'{{"command_id": "{{run}}-{session}", "payload": {{"session_id": "{session}-{{run}}", '
                f'"source_id": "{SOURCE}", "topic": "a write across a crash"}}}}')
        return Step(name=name, method="POST", target="/v1/projects/sim-{run}/sessions",
                    headers=(*auth, ("Content-Type", "application/json")), body=body, json_body=True,
                    expect=(expect,), note=note)

    steps = [write("step1", "fault-a", Answer(status=200), "a write, answered"),
             Step(name="step2", method=RESTART, target="/", note="a crash after the answer, then the same server again")]
    if rule == "receipts survive restarts":
        same = tuple(Field(path=name, equals=f"{{step1.body.{name}}}") for name in _PINNED)
        steps.append(write("step3", "fault-a", Answer(status=200, fields=same),
                           "the identical write again: its stored receipt"))
    else:
        at = (Field(path="entries.0.seq", equals="{step3.body.project_seq}"),
              Field(path="entries.0.resource.id", equals="{step3.body.resource.id}"))
        steps += [write("step3", "fault-b", Answer(status=200), "another write, after the restart"),
                  Step(name="step4", method="GET", target="/v1/projects/sim-{run}/snapshot", headers=auth,
                       expect=(Answer(status=200),), note="the project's epoch"),
                  Step(name="step5", method="GET", headers=auth, expect=(Answer(status=200, fields=at),),
                       target="/v1/projects/sim-{run}/changes?project_epoch={step4.body.project_epoch}"
                              "&after_seq={step1.body.project_seq}&limit=10",
                       note="the feed after the first write: the second, at the sequence its receipt gave")]
    who = Identity(label=_ACTOR, values=(("tenant", SIM_TENANT), ("project", "sim-{run}"), ("actor", _ACTOR),
                                         ("role", "writer")))
    return Reproduction(title=f"fault finding: {rule}", origin="simulator", requirements=requirements,
                        identities=(who,), steps=tuple(steps), context=context,
                        target=TargetInfo(provision=template, workdir=workdir, credential_prefix="tok-",
                                          hint=_HINT + (_SERVED if template and "{dir}" in template else "")))


_HINT = ("Start the server yourself, its pid in a file: SERVER_PID_FILE=FILE RESTART_COMMAND='its command' "
         "BASE_URL=http://HOST:PORT sh this-script.")
_SERVED = (" The provisioning template names {dir}, the data folder of the kit's [serve] run, deleted with it: "
           "edit the template in this script to your server's data.")
