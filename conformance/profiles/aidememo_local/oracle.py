"""What a correct CLI answers to a reproduction's command steps: this kit's CLI, run on them twice.

``expect`` runs a record's steps with the kit's own CLI (``EMBEDDED``), twice, each time in a fresh
directory and namespace, and writes beside each command step its exit status and the fields of
its output (JSON, JSON lines, the JSON inside an MCP tool's text) that both runs printed alike,
the namespace and directory written back as ``{run}`` and ``{dir}``. What differs between two runs
(the ids and instants a CLI mints) is not pinned, nor prose: messages, shell text, the MCP
server's name and texts, anything ending ``_at`` or ``_ms``. As for the HTTP profile, the
reference is the executable spec here.

Steps run at once (a group) keep the check's own expectations, and the record says it is a race
the script cannot force: how many of a group's writers win is the interleaving's.

A remote check's record (``AML-REM-*``) cannot run: its CLI logs in to the reference server the
run started, with tokens the kit provisioned there and wrote to files of a ``HOME`` of the
check's; none of them outlives the run. Its script says so on its first line and exits 2; the
check's printed rerun is how it is run again.
"""

from __future__ import annotations

import dataclasses
import secrets
import tempfile

from conformance.profiles.aidememo_local.settings import EMBEDDED
from conformance.reproduction.record import (
    COMMAND,
    JSON,
    JSON_TEXT,
    Answer,
    Answered,
    Field,
    Reproduction,
    Unbound,
    escape,
    text_json,
)
from conformance.reproduction.runner import command_runner, send_steps

__all__ = ["expect"]

_REMOTE = "AML-REM-"
_REMOTE_REASON = ("a remote check: its CLI logs in to the reference server the run started, with tokens the kit "
                  "provisioned there, and neither outlives the run; rerun the check with its printed command")
_PROSE = frozenset({"message", "export", "serverInfo", "instructions", "title", "description"})
_MINTED_SUFFIXES = ("_at", "_ms")


def _no_request(method: str, url: str, headers: object, body: object) -> Answered:
    return Answered(error="the local oracle sends no HTTP request")


def _fields(value: JSON, path: str, run: str, directory: str, out: list[Field]) -> None:
    if (inner := text_json(value, path)) is not None:
        _fields(inner, f"{path}.{JSON_TEXT}", run, directory, out)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in _PROSE and not key.endswith(_MINTED_SUFFIXES) and key.replace("_", "").isalnum():
                _fields(item, f"{path}.{key}" if path else key, run, directory, out)
    elif isinstance(value, list):
        out.append(Field(path=f"{path}.#" if path else "#", equals=len(value)))
        for index, item in enumerate(value):
            _fields(item, f"{path}.{index}" if path else str(index), run, directory, out)
    elif isinstance(value, str):
        out.append(Field(path=path, equals=escape(value).replace(directory, "{dir}").replace(run, "{run}")))
    else:
        out.append(Field(path=path, equals=value))


def _pinned(got: Answered, run: str, directory: str) -> list[Field]:
    out: list[Field] = []
    try:
        _fields(got.json(), "", run, directory, out)
    except Unbound:
        return []  # not JSON: the exit status is what a correct CLI answers
    return out


def _answers(repro: Reproduction) -> tuple[dict[str, Answered], str, str]:
    """One run of ``repro``'s steps with the kit's CLI: the answers, its namespace and its directory."""
    run = f"o{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="aidememo-local-oracle-") as directory:
        answers = send_steps(repro, base_url="", send=_no_request, tokens={}, run=run,
                             execute=command_runner(EMBEDDED), directory=directory)[1]
    return answers, run, directory


def expect(repro: Reproduction) -> Reproduction:
    """``repro`` with the kit's CLI's answers as each command step's expectation (see the module docstring)."""
    if any(r.startswith(_REMOTE) for r in repro.requirements):
        return dataclasses.replace(repro, unrunnable=_REMOTE_REASON)
    if not repro.steps or any(step.method != COMMAND for step in repro.steps):
        return repro
    bare = dataclasses.replace(repro, steps=tuple(dataclasses.replace(s, expect=()) for s in repro.steps))
    first, second = _answers(bare), _answers(bare)
    steps = []
    for step in repro.steps:
        one, two = first[0].get(step.name), second[0].get(step.name)
        if step.group is not None or one is None or two is None or one.exit is None or one.exit != two.exit:
            steps.append(step)
            continue
        again = set(_pinned(two, *second[1:]))
        fields = tuple(f for f in _pinned(one, *first[1:]) if f in again)
        steps.append(dataclasses.replace(step, expect=(Answer(exit=one.exit, fields=fields),)))
    grouped = {s.group for s in steps if s.group is not None}
    race = repro.race or (f"{len(grouped)} group(s) of commands run at once; the interleaving decides their "
                          "outcome." if grouped else "")
    return dataclasses.replace(repro, steps=tuple(steps), race=race, tries=5 if grouped else repro.tries)
