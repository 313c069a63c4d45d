"""A fault finding as a reproduction record (``conformance.reproduction``), whose script needs no kit.

Only what a few requests and one crash can show is written as steps: receipts that do not
survive a restart (the rule ``receipts survive restarts``). The record makes a fresh writer with
the target file's template, sends one write, kills the server and starts it again (the
``RESTART`` step: the script's ``SERVER_PID_FILE`` and ``RESTART_COMMAND``), and sends the
identical write again: a correct server answers the stored receipt, the same sequence, revision,
time and fingerprint. The campaign's own command is not copied: it needed the races before it.

The other rules need the campaign's races around the fault (a sequence head lost over a restart
shows in the feed only after writes on both sides of it; a lost answer in a race needs the
race), and a script cannot make them: their record says so and runs nothing (exit 2), naming
the command that replays the finding with its fault schedule.
"""

from __future__ import annotations

from conformance.reproduction.record import RESTART, Answer, Field, Identity, Reproduction, Step, TargetInfo
from simulations.plan import SOURCE
from simulations.targets import SIM_TENANT

__all__ = ["SCRIPTED_RULES", "fault_reproduction"]

SCRIPTED_RULES = frozenset({"receipts survive restarts"})
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
    headers = (("Authorization", f"Bearer {{token.{_ACTOR}}}"), ("Content-Type", "application/json"))
    body = ('{"command_id": "{run}-fault-session", "payload": {"session_id": "fault-session-{run}", '
            f'"source_id": "{SOURCE}", "topic": "a receipt across a crash"}}}}')
    same = tuple(Field(path=name, equals=f"{{step1.body.{name}}}") for name in _PINNED)

    def write(name: str, expect: Answer, note: str) -> Step:
        return Step(name=name, method="POST", target="/v1/projects/sim-{run}/sessions", headers=headers, body=body,
                    json_body=True, expect=(expect,), note=note)

    steps = (
        write("step1", Answer(status=200), "a write, answered"),
        Step(name="step2", method=RESTART, target="/", note="a crash after the answer, then the same server again"),
        write("step3", Answer(status=200, fields=same), "the identical write again: its stored receipt"),
    )
    who = Identity(label=_ACTOR, values=(("tenant", SIM_TENANT), ("project", "sim-{run}"), ("actor", _ACTOR),
                                         ("role", "writer")))
    return Reproduction(title=f"fault finding: {rule}", origin="simulator", requirements=requirements,
                        identities=(who,), steps=steps, context=context,
                        target=TargetInfo(provision=template, workdir=workdir, credential_prefix="tok-",
                                          hint=_HINT + (_SERVED if template and "{dir}" in template else "")))


_HINT = ("Start the server yourself, its pid in a file: SERVER_PID_FILE=FILE RESTART_COMMAND='its command' "
         "BASE_URL=http://HOST:PORT sh this-script.")
_SERVED = (" The provisioning template names {dir}, the data folder of the kit's [serve] run, deleted with it: "
           "edit the template in this script to your server's data.")
