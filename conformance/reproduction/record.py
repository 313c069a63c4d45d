"""The reproduction record: one failure as steps a script or the replay runner sends again.

Theory of operation. A suite case, a ``diff`` divergence and a simulator finding are the same
thing: identities made anew from the target's template, then requests, some sent at once,
each with the answer a correct server gives beside it. A ``Reproduction`` holds exactly that,
as values:

* ``Identity``: a label and the template's values (tenant, project, actor, role), each holding
  ``{run}``, the namespace a rerun makes fresh, so a rerun never meets the last run's state.
* ``Step``: method, target (path and query), headers, body, all templates. A template reads
  ``{run}``, ``{token.LABEL}`` (the identity's credential, provisioned anew) and any value of an
  earlier answer by name: ``{step3.body.handoff.revision}``, ``{step2.status}``,
  ``{step4.header.etag}``. Server-assigned values (epochs, cursors, revisions, ids the server
  mints) are bound this way, never copied from the first run. ``{{`` is a literal ``{``.
  Steps sharing a ``group`` are sent at once behind a barrier; those of a group sharing a
  ``lane`` are sent one after another within it (one contender doing several things in a row,
  while the others' requests are in flight). A step whose method is
  ``RESTART`` is no request: the server is killed (SIGKILL) and started again, which only a
  script given the server's PID file and start command can do (a fault finding's). A step
  whose method is ``EXEC`` runs the target's command line (a CLI target's) with the step's
  ``argv`` words, ``env`` and its body on stdin, in the run's own directory ``{dir}``; its
  answer is the exit status, stdout (read as the body) and stderr.
* ``Answer``: what a correct server answers (status, error code, pinned fields; a command's
  exit status); a step holds when its answer matches one of its ``expect`` alternatives (none:
  any answer holds).

Judging is the same everywhere: steps run in order, a group as one; the first step whose
answer matches none of its alternatives shows the bug (``Verdict.SHOWN``, exit 1). Every step
holding is ``NOT_SHOWN`` (exit 0), or ``NOT_MET`` (exit 3) for a record whose ``race`` says the
interleaving cannot be forced: a race that did not show is not proof it is gone. Anything that
keeps the steps from being sent (provisioning, no answer, a template without a value) is
``CANNOT_RUN`` (exit 2), with the reason.

This module is pure and imports the standard library only: scripts carry its source and run
it with ``python3`` (``conformance.reproduction.engine``), so a script and the Python runner
judge with the same code.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import permutations
from typing import Union
from urllib.parse import quote

__all__ = ["COMMAND", "JSON_TEXT", "RESTART", "Answer", "Answered", "FORMAT", "Field", "Identity", "RecordError", "Reproduction", "Scope", "Step",
           "TargetInfo", "Unbound", "Verdict", "escape", "judge_group", "load_record", "placeholders", "render",
           "resolve", "text_json"]

FORMAT = "aidememo-reproduction/1"
RESTART = "RESTART"  # a step's method that is no request: kill -9 of the server, then its command again
COMMAND = "EXEC"  # a step's method that runs the target's command line instead of sending a request
JSON_TEXT = "~json"  # a path segment: the JSON value a string holds
JSON = Union[None, bool, int, float, str, list["JSON"], dict[str, "JSON"]]


class RecordError(ValueError):
    """A reproduction record that cannot be read (the message says where)."""


class Unbound(LookupError):
    """A template names a value no earlier answer gave (the message says which)."""


class Verdict(IntEnum):
    """What one reproduction found; the value is the exit status of its script and runner."""

    NOT_SHOWN = 0  # every step got an answer a correct server gives
    SHOWN = 1  # a step's answer departed: the bug shows
    CANNOT_RUN = 2  # it could not be run (the reason is printed)
    NOT_MET = 3  # a race the script cannot force did not show in any try: inconclusive


# -- templates ---------------------------------------------------------------------------------------
_REF = r"run|dir|token\.[A-Za-z0-9_.-]+|step\d+\.(?:status|header\.[A-Za-z0-9_-]+|body(?:\.[^{}\s\"]+)?)"
_PLACEHOLDER = re.compile(r"\{(" + _REF + r")\}")


def escape(literal: str) -> str:
    """``literal`` as template text: every ``{`` that would read as ``{{`` or a placeholder is doubled."""
    out: list[str] = []
    for index, char in enumerate(literal):
        if char == "{" and (literal.startswith("{", index + 1) or _PLACEHOLDER.match(literal, index)):
            out.append("{{")
        else:
            out.append(char)
    return "".join(out)


def _parts(template: str) -> Iterator[tuple[str, bool]]:
    """(text, is_ref) pieces of a template, literal runs unescaped."""
    index, literal = 0, []
    while index < len(template):
        if template.startswith("{{", index):
            literal.append("{")
            index += 2
            continue
        match = _PLACEHOLDER.match(template, index)
        if match is None:
            literal.append(template[index])
            index += 1
            continue
        if literal:
            yield "".join(literal), False
            literal = []
        yield match.group(1), True
        index = match.end()
    if literal:
        yield "".join(literal), False


def placeholders(template: str) -> tuple[str, ...]:
    """The names a template reads, in order."""
    return tuple(text for text, is_ref in _parts(template) if is_ref)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """One answer as sent: status (0: none came, ``error`` says why), headers, body bytes. A
    command's: ``exit`` its exit status (None: it never finished), body its stdout, error its stderr."""

    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    error: str = ""
    exit: int | None = None

    @property
    def came(self) -> bool:
        """Whether there is an answer to judge (an HTTP status, or a command that finished)."""
        return self.status != 0 or self.exit is not None

    def describe(self) -> str:
        return f"exit {self.exit}" if self.exit is not None else f"HTTP {self.status or 'no answer'}"

    def json(self) -> JSON:
        """The body as JSON; ``Unbound`` when it is not JSON. A command's stdout of JSON lines (an
        ``mcp`` server's answers) is the list of them."""
        try:
            value: JSON = json.loads(self.body)
        except (ValueError, UnicodeDecodeError, RecursionError):  # standard library only: no bounded loader here
            if self.exit is None:
                raise Unbound("the answer's body is not JSON") from None
            return json_lines(self.body)
        return value

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def error_code(self) -> str | None:
        try:
            data = self.json()
        except Unbound:
            return None
        error = data.get("error") if isinstance(data, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """What templates read: the namespace, the credentials and the answers so far (by step name)."""

    run: str
    tokens: Mapping[str, str] = field(default_factory=dict)
    answers: Mapping[str, Answered] = field(default_factory=dict)
    dir: str = ""  # the run's own directory, where a command step's files (a CLI's store) are made


def json_lines(data: bytes) -> JSON:
    """Output of one JSON value a line, as their list; ``Unbound`` when a line is not JSON, or there is none."""
    try:
        values: list[JSON] = [json.loads(line) for line in data.splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Unbound("the output is not JSON, nor JSON lines") from None
    if not values:
        raise Unbound("the output is empty")
    return values


def text_json(value: object, path: str) -> dict[str, JSON] | list[JSON] | None:
    """The JSON object or list a string below the root holds (an MCP tool's text content), which a
    path reads through at ``~json``; None for any other value."""
    if not (isinstance(value, str) and value[:1] in ("{", "[") and path):
        return None
    try:
        inner = json.loads(value)
    except (ValueError, RecursionError):  # the script carries this module: no import beyond the standard library
        return None
    return inner if isinstance(inner, dict | list) else None


def at_path(value: JSON, path: str) -> JSON:
    """The value at a dotted path (``handoff.revision``, ``entries.0.seq``; ``#``: a list's length;
    ``~json``: the JSON a string holds, as an MCP tool's text content does).

    Raises:
        Unbound: the path leads nowhere in ``value``.
    """
    for key in path.split(".") if path else ():
        if key == "#" and isinstance(value, list | dict):
            value = len(value)
        elif key == JSON_TEXT and isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                raise Unbound(f"no JSON in the text at {path!r}") from None
        elif isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise Unbound(f"no {key!r} at {path!r}")
    return value


def resolve(name: str, scope: Scope) -> JSON:
    """The value a placeholder names.

    Raises:
        Unbound: no such token, step, header or field.
    """
    if name == "run":
        return scope.run
    if name == "dir":
        if not scope.dir:
            raise Unbound("no directory for the run's files")
        return scope.dir
    head, _, rest = name.partition(".")
    if head == "token":
        if rest not in scope.tokens:
            raise Unbound(f"no credential for identity {rest!r}")
        return scope.tokens[rest]
    answer = scope.answers.get(head)
    if answer is None:
        raise Unbound(f"{head} has no answer (yet)")
    part, _, path = rest.partition(".")
    if part == "status":
        return answer.status
    if part == "header":
        value = answer.header(path)
        if value is None:
            raise Unbound(f"{head}'s answer has no {path} header")
        return value
    try:
        return at_path(answer.json(), path)
    except Unbound as exc:
        raise Unbound(f"{head}'s answer: {exc}") from None


# How a value is written where a template puts it. In a URL it is percent-encoded (a cursor or
# epoch is one path segment or query value); in JSON text it is escaped as a string's inside (the
# template holds the quotes) or written as JSON when it is not a string.
_URL_SAFE = "-._~:@!$'()*+,;="


def _written(value: JSON, context: str) -> str:
    if context == "json":
        return json.dumps(value, ensure_ascii=False)[1:-1] if isinstance(value, str) else json.dumps(value)
    text = value if isinstance(value, str) else json.dumps(value)
    return quote(text, safe=_URL_SAFE) if context == "url" else text


def render(template: str, scope: Scope, context: str = "text") -> str:
    """The template with every placeholder filled (``context``: ``text``, ``url`` or ``json``).

    Raises:
        Unbound: a placeholder names nothing in ``scope``.
    """
    return "".join(_written(resolve(text, scope), context) if is_ref else text for text, is_ref in _parts(template))


def render_value(value: JSON, scope: Scope) -> JSON:
    """A JSON value whose strings are templates: a string that is one placeholder takes its value whole."""
    if isinstance(value, str):
        parts = list(_parts(value))
        if len(parts) == 1 and parts[0][1]:
            return resolve(parts[0][0], scope)
        return render(value, scope)
    if isinstance(value, list):
        return [render_value(item, scope) for item in value]
    if isinstance(value, dict):
        return {key: render_value(item, scope) for key, item in value.items()}
    return value


# -- the record ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """A field a correct answer has: ``path`` (see ``at_path``) equal to ``equals`` (strings are templates).

    With ``minus``, what must equal ``equals`` is the number at ``path`` less the number at ``minus``:
    a lease's length, where both instants are the server's to choose but their distance is not.

    With ``digest`` (``sha256``), ``equals`` is a text template and the value at ``path`` must be the
    lowercase hex SHA-256 of its UTF-8 bytes once filled in: a command's fingerprint, which hashes
    ids holding the run's namespace, so no one run's value can be pinned, but its rule can.
    """

    path: str
    equals: JSON
    minus: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        if self.digest not in (None, "sha256"):
            raise RecordError(f"a field's digest is sha256, not {self.digest!r}")
        if self.digest is not None and not isinstance(self.equals, str):
            raise RecordError(f"{self.path}: a digest's equals is the text it hashes")

    def value(self, answer: JSON) -> JSON:
        """What this field reads in ``answer`` (raises ``Unbound`` for a missing path)."""
        got = at_path(answer, self.path)
        if self.minus is None:
            return got
        base = at_path(answer, self.minus)
        if type(got) is not int or type(base) is not int:
            return f"{got!r} - {base!r}"  # not two integers: never equal to the pinned length
        return got - base

    def wanted(self, scope: Scope) -> JSON:
        """What the field must equal, filled from ``scope`` (raises ``Unbound``)."""
        want = render_value(self.equals, scope)
        if self.digest is None:
            return want
        return hashlib.sha256(str(want).encode("utf-8")).hexdigest()

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"path": self.path, "equals": self.equals}
        if self.minus is not None:
            out["minus"] = self.minus
        if self.digest is not None:
            out["digest"] = self.digest
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """One answer a correct server may give: its status, error code (None: not asserted) and fields;
    a command's: its exit status (``exit``, then ``status`` is 0) and the fields of its stdout."""

    status: int = 0
    code: str | None = None
    fields: tuple[Field, ...] = ()
    exit: int | None = None

    def __post_init__(self) -> None:
        if self.exit is not None:
            if self.status or not 0 <= self.exit <= 255:
                raise RecordError(f"a command's answer is an exit status (0-255) alone, not {self.exit}")
        elif not 100 <= self.status <= 599:
            raise RecordError(f"an expected status must be an HTTP status, not {self.status}")

    def describe(self) -> str:
        text = f"exit {self.exit}" if self.exit is not None else f"HTTP {self.status}"
        text += f" {self.code}" if self.code else ""
        return text + (f" with {len(self.fields)} pinned fields" if self.fields else "")

    def departure(self, answered: Answered, scope: Scope) -> str | None:
        """Why ``answered`` is not this answer (None: it is)."""
        if self.exit is not None:
            if answered.exit != self.exit:
                return f"{answered.describe()}, not exit {self.exit}"
        elif answered.status != self.status:
            return f"HTTP {answered.status or 'no answer'}, not {self.status}"
        if self.code is not None and answered.error_code() != self.code:
            return f"error code {answered.error_code()!r}, not {self.code!r}"
        for pinned in self.fields:
            try:
                got = pinned.value(answered.json())
            except Unbound:
                return f"no field {pinned.path}" + (f" or {pinned.minus}" if pinned.minus else "")
            try:
                want = pinned.wanted(scope)
            except Unbound:
                continue  # what it would equal was never answered: nothing to compare
            if got != want:
                name = f"{pinned.path} - {pinned.minus}" if pinned.minus else pinned.path
                hashed = f" (the SHA-256 of {render(str(pinned.equals), scope)[:400]})" if pinned.digest else ""
                return f"{name} is {json.dumps(got, ensure_ascii=False)[:200]}, not " \
                       f"{json.dumps(want, ensure_ascii=False)[:200]}{hashed}"
        return None

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"exit": self.exit} if self.exit is not None else {"status": self.status}
        if self.code is not None:
            out["code"] = self.code
        if self.fields:
            out["fields"] = [f.to_json() for f in self.fields]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One request; ``group``: steps of one group are sent at once; ``expect``: any of these holds."""

    name: str
    method: str
    target: str  # path and query, a template (``url`` context)
    headers: tuple[tuple[str, str], ...] = ()  # values are templates; a credential is ``{token.LABEL}``
    body: str | None = None  # a template (``json`` context when ``json_body``, else ``text``)
    json_body: bool = False
    group: int | None = None
    lane: int | None = None  # steps of a group sharing a lane: sent in order, one after another
    expect: tuple[Answer, ...] = ()
    note: str = ""  # what the step does, for the reader
    argv: tuple[str, ...] = ()  # a command step's words after the target's command line (templates)
    env: tuple[tuple[str, str], ...] = ()  # a command step's variables (values are templates)
    # Sent, unjudged, when a run stops before it (a held test clock's release): a replay leaves the
    # target as the check did.
    cleanup: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"step\d+", self.name):
            raise RecordError(f"a step is named stepN, not {self.name!r}")
        if not re.fullmatch(r"[A-Z]+", self.method):
            raise RecordError(f"{self.name}: a method is upper-case letters, not {self.method!r}")
        if self.method == COMMAND:
            if self.target or self.headers or not self.argv:
                raise RecordError(f"{self.name}: a command step has argv words, and no target or headers")
        elif not self.target.startswith("/"):
            raise RecordError(f"{self.name}: the target must start with '/', not {self.target[:40]!r}")

    def expected(self) -> str:
        return " or ".join(a.describe() for a in self.expect) or "any answer (not judged)"

    def departure(self, answered: Answered, scope: Scope) -> str | None:
        """Why ``answered`` holds none of the expected answers (None: one holds, or none is expected)."""
        if not self.expect:
            return None
        why = [a.departure(answered, scope) for a in self.expect]
        return None if any(w is None for w in why) else "; ".join(w for w in why if w)

    def request(self, scope: Scope) -> tuple[str, list[tuple[str, str]], bytes | None]:
        """(target, headers, body) filled from ``scope``. Raises ``Unbound``."""
        body = None if self.body is None else render(self.body, scope, "json" if self.json_body else "text")
        return (render(self.target, scope, "url"), [(k, render(v, scope)) for k, v in self.headers],
                None if body is None else body.encode("utf-8"))

    def command(self, scope: Scope) -> tuple[list[str], list[tuple[str, str]], bytes]:
        """A command step's (words, variables, stdin) filled from ``scope``. Raises ``Unbound``."""
        stdin = b"" if self.body is None else render(self.body, scope).encode("utf-8")
        return [render(word, scope) for word in self.argv], [(k, render(v, scope)) for k, v in self.env], stdin

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"name": self.name, "method": self.method, "target": self.target}
        if self.argv:
            out["argv"] = list(self.argv)
        if self.env:
            out["env"] = [[k, v] for k, v in self.env]
        if self.headers:
            out["headers"] = [[k, v] for k, v in self.headers]
        if self.body is not None:
            out["body"] = self.body
            out["json_body"] = self.json_body
        if self.group is not None:
            out["group"] = self.group
        if self.lane is not None:
            out["lane"] = self.lane
        out["expect"] = [a.to_json() for a in self.expect]
        if self.note:
            out["note"] = self.note
        if self.cleanup:
            out["cleanup"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """An identity the target's template makes anew: ``values`` fill the template (templates with ``{run}``)."""

    label: str
    values: tuple[tuple[str, str], ...]
    given: bool = False  # the template cannot make it (a fixed token, a bound source): its token file is given

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.label):
            raise RecordError(f"an identity label is letters, digits, '_', '.' or '-', not {self.label!r}")

    def filled(self, run: str) -> dict[str, str]:
        return {key: render(value, Scope(run=run)) for key, value in self.values}


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetInfo:
    """Where the record was found and how to make identities there (the target file's template)."""

    url: str | None = None  # the base URL (None: the run's target is gone; BASE_URL must be given)
    provision: str | None = None  # the template command: {tenant} {project} {actor} {role} {token_file}
    workdir: str = ""  # where the template ran
    credential_prefix: str = ""  # new tokens: this prefix and 32 hex digits
    hint: str = ""  # what to start first when the target is gone
    # Templates for identities that hold a field, (field, template), first fit wins: a token bound to
    # a source (``bind_source``) is made by the target's bound template, with {bind_source} {bind_actor}.
    keyed: tuple[tuple[str, str], ...] = ()
    cli: str | None = None  # the command line a command step runs (shell words; None: no command steps)

    def template(self, values: Mapping[str, str]) -> str | None:
        """The template that makes an identity with ``values`` (None: none is given)."""
        return next((t for key, t in self.keyed if key in values), self.provision)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reproduction:
    """One failure, reproducible (see the module docstring)."""

    title: str
    origin: str  # "suite", "diff" or "simulator"
    requirements: tuple[str, ...] = ()
    identities: tuple[Identity, ...] = ()
    steps: tuple[Step, ...] = ()
    race: str = ""  # non-empty: the interleaving that must be met, which no script can force
    unrunnable: str = ""  # non-empty: why no script or runner can send these steps
    tries: int = 1  # runs (fresh identities each) before a race is called not met
    target: TargetInfo = field(default_factory=TargetInfo)
    context: str = ""  # what the finding said, shown before the steps (the check's reason, the race)

    def __post_init__(self) -> None:
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise RecordError("two steps share a name")
        labels = {i.label for i in self.identities}
        for index, step in enumerate(self.steps):
            earlier = set(names[:index])
            texts = [step.target, *(v for _, v in step.headers), *([step.body] if step.body is not None else [])]
            for name in (n for text in texts for n in placeholders(text)):
                head, _, rest = name.partition(".")
                if head == "token" and rest not in labels:
                    raise RecordError(f"{step.name} reads the credential of {rest!r}, an identity the record lacks")
                if head.startswith("step") and head not in earlier:
                    raise RecordError(f"{step.name} reads {name}, which is not an earlier step")
        if self.tries < 1:
            raise RecordError("tries must be at least 1")

    @property
    def restarts(self) -> bool:
        """Whether a step kills and restarts the server (only a script told how can run it)."""
        return any(step.method == RESTART for step in self.steps)

    @property
    def runs_commands(self) -> bool:
        """Whether a step runs the target's command line (which then must be known)."""
        return any(step.method == COMMAND for step in self.steps)

    @property
    def cannot_run(self) -> str:
        """Why no script or runner can send this record ("" when one can)."""
        return self.unrunnable or ("" if self.steps else "the record has no steps to send")

    def groups(self) -> list[list[Step]]:
        """The steps in sending order, each group (consecutive steps sharing ``group``) as one batch."""
        batches: list[list[Step]] = []
        for step in self.steps:
            if batches and step.group is not None and batches[-1][0].group == step.group:
                batches[-1].append(step)
            else:
                batches.append([step])
        return batches

    @staticmethod
    def lanes(batch: Sequence[Step]) -> list[list[Step]]:
        """A batch's steps by lane, in order: a step without a lane is a lane of its own."""
        lanes: dict[object, list[Step]] = {}
        for index, step in enumerate(batch):
            lanes.setdefault(index if step.lane is None else ("lane", step.lane), []).append(step)
        return list(lanes.values())

    def to_json(self) -> dict[str, JSON]:
        target: dict[str, JSON] = {"url": self.target.url, "provision": self.target.provision,
                                   "workdir": self.target.workdir, "credential_prefix": self.target.credential_prefix,
                                   "hint": self.target.hint}
        if self.target.keyed:
            target["keyed_provision"] = [[key, template] for key, template in self.target.keyed]
        if self.target.cli is not None:
            target["cli"] = self.target.cli
        return {"format": FORMAT, "title": self.title, "origin": self.origin, "requirements": list(self.requirements),
                "race": self.race, "unrunnable": self.unrunnable, "tries": self.tries, "context": self.context,
                "target": target,
                "identities": [{"label": i.label, "values": dict(i.values), "given": i.given} for i in self.identities],
                "steps": [s.to_json() for s in self.steps]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n"


# -- judging -------------------------------------------------------------------------------------------
def judge_group(steps: Sequence[Step], answers: Sequence[Answered], scope: Scope) -> str | None:
    """Why a group's answers show the bug (None: they hold). A group's answers may come in any
    order (a race's winner is whichever server thread came first): they hold when some pairing
    of steps to answers holds for every step. A step in a lane of several is judged by its own
    answer: its lane sent it, in order, after the lane's steps before it."""
    if len(steps) == 1:
        why = steps[0].departure(answers[0], scope)
        return None if why is None else f"{steps[0].name}: {why} (expected {steps[0].expected()})"
    laned = {id(step) for lane in Reproduction.lanes(steps) if len(lane) > 1 for step in lane}
    for step, answer in zip(steps, answers):
        why = step.departure(answer, scope) if id(step) in laned else None
        if why is not None:
            return f"{step.name} (sent in its group, after its lane's steps before it): {why} (expected {step.expected()})"
    pairs = [(step, answer) for step, answer in zip(steps, answers) if id(step) not in laned]
    if not pairs:
        return None
    steps, answers = [step for step, _ in pairs], [answer for _, answer in pairs]
    if len(steps) <= 7:  # 5040 pairings at most; a group is a race of a few contenders
        for order in permutations(range(len(answers))):
            if all(step.departure(answers[i], scope) is None for step, i in zip(steps, order)):
                return None
    elif all(step.departure(answer, scope) is None for step, answer in zip(steps, answers)):
        return None
    got = ", ".join(a.describe() + (f" {a.error_code()}" if a.error_code() else "") for a in answers)
    want = ", ".join(s.expected() for s in steps)
    return f"{steps[0].name}..{steps[-1].name} (sent at once) answered {got}; expected, in some order: {want}"


# -- reading a record ----------------------------------------------------------------------------------
def _text(data: Mapping[str, object], key: str, where: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise RecordError(f"{where}: {key!r} must be text")
    return value


def _answer(data: object, where: str) -> Answer:
    if not isinstance(data, dict) or not isinstance(data.get("status", data.get("exit")), int):
        raise RecordError(f"{where}: an expected answer needs a status (or a command's exit)")
    exit_status = data.get("exit")
    fields = data.get("fields", [])
    if not isinstance(fields, list) or not all(isinstance(f, dict) and isinstance(f.get("path"), str)
                                               and isinstance(f.get("minus", ""), str)
                                               and isinstance(f.get("digest", ""), str) for f in fields):
        raise RecordError(f"{where}: fields must be a list of {{path, equals[, minus][, digest]}}")
    code = data.get("code")
    return Answer(status=data.get("status", 0), exit=exit_status if isinstance(exit_status, int) else None,
                  code=code if isinstance(code, str) else None,
                  fields=tuple(Field(path=f["path"], equals=f.get("equals"), minus=f.get("minus"),
                                     digest=f.get("digest")) for f in fields))


def _step(data: object, index: int) -> Step:
    where = f"step {index + 1}"
    if not isinstance(data, dict):
        raise RecordError(f"{where}: not an object")
    headers, env, argv = data.get("headers", []), data.get("env", []), data.get("argv", [])
    if not all(isinstance(pairs, list) and all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
                                               for h in pairs) for pairs in (headers, env)):
        raise RecordError(f"{where}: headers and env must be [name, value] pairs of text")
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
        raise RecordError(f"{where}: argv must be a list of text")
    expect = data.get("expect", [])
    group, lane = data.get("group"), data.get("lane")
    body = data.get("body")
    if not isinstance(expect, list) or any(n is not None and not isinstance(n, int) for n in (group, lane)) or \
            (body is not None and not isinstance(body, str)):
        raise RecordError(f"{where}: expect must be a list, group and lane numbers, body text")
    return Step(name=_text(data, "name", where), method=_text(data, "method", where),
                target=_text(data, "target", where), headers=tuple((h[0], h[1]) for h in headers), body=body,
                argv=tuple(argv), env=tuple((e[0], e[1]) for e in env),
                json_body=data.get("json_body") is True, group=group, lane=lane,
                expect=tuple(_answer(a, where) for a in expect), note=_text(data, "note", where, ""),
                cleanup=data.get("cleanup") is True)


def load_record(text: str) -> Reproduction:
    """A record from its JSON text.

    Raises:
        RecordError: not JSON, not this format, or a part of the wrong shape.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"not JSON ({str(exc).splitlines()[0] if str(exc) else 'nested too deep'})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordError(f"not an {FORMAT} record")
    target = data.get("target", {})
    identities = data.get("identities", [])
    steps = data.get("steps", [])
    requirements = data.get("requirements", [])
    if not isinstance(target, dict) or not isinstance(identities, list) or not isinstance(steps, list) \
            or not isinstance(requirements, list):
        raise RecordError("target must be an object; identities, steps and requirements lists")
    people = []
    for item in identities:
        if not isinstance(item, dict) or not isinstance(item.get("values"), dict):
            raise RecordError("an identity needs a label and values")
        people.append(Identity(label=_text(item, "label", "identity"), given=item.get("given") is True,
                               values=tuple((str(k), str(v)) for k, v in item["values"].items())))
    url, provision, cli = target.get("url"), target.get("provision"), target.get("cli")
    keyed = target.get("keyed_provision", [])
    if not isinstance(keyed, list) or not all(isinstance(k, list) and len(k) == 2 and all(isinstance(x, str) for x in k)
                                              for k in keyed):
        raise RecordError("target: keyed_provision must be [field, template] pairs of text")
    tries = data.get("tries", 1)
    return Reproduction(
        title=_text(data, "title", "record"), origin=_text(data, "origin", "record"),
        requirements=tuple(str(r) for r in requirements), identities=tuple(people),
        steps=tuple(_step(s, i) for i, s in enumerate(steps)), race=_text(data, "race", "record", ""),
        unrunnable=_text(data, "unrunnable", "record", ""), tries=tries if isinstance(tries, int) else 1,
        context=_text(data, "context", "record", ""),
        target=TargetInfo(url=url if isinstance(url, str) else None,
                          provision=provision if isinstance(provision, str) else None,
                          workdir=_text(target, "workdir", "target", ""),
                          credential_prefix=_text(target, "credential_prefix", "target", ""),
                          hint=_text(target, "hint", "target", ""), keyed=tuple((k[0], k[1]) for k in keyed),
                          cli=cli if isinstance(cli, str) else None))


def identity_argv(template: str, values: Mapping[str, str], token_file: str,
                  split: Callable[[str], list[str]]) -> list[str] | None:
    """The template's words filled for one identity (None: it names a value the identity lacks)."""
    filled = []
    for word in split(template):
        names = re.findall(r"\{(\w+)\}", word)
        if any(n != "token_file" and n not in values for n in names):
            return None
        filled.append(re.sub(r"\{(\w+)\}", lambda m: token_file if m.group(1) == "token_file" else values[m.group(1)],
                             word))
    return filled
