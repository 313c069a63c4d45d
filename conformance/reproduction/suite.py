"""A suite case as a reproduction record: a check's transcript, rebased, bound and judged.

From the verdict record of a check that did not pass:

* identities: the check's, their values rebased into ``{run}`` (ids the check minted hold the
  run tag); one the target's template cannot make (a fixed token, a bound source) is ``given``;
* steps: the HTTP entries of the transcript, in order, a race's requests as one group (a
  contender's several requests in a row as one lane of it). Every
  id the check minted is rebased into ``{run}``; every value an earlier answer gave (an epoch, a
  cursor, a revision, an id the server minted) is bound to that answer by name, never copied;
  a credential header is ``{token.LABEL}``. A retried ``503`` attempt is left out;
* expectations: what the check's helpers stated of each step (``HTTP 409 stale_revision``), and
  what the check expected of the step that departed. A profile that has a reference replaces
  them with the reference's own answers (``Expectations``), which also pin the fields a check
  judged as a whole (a listing that leaks, a cursor that does not move).

A command step (a CLI target's) becomes an ``EXEC`` step: its words after the target's command
line, a file it named under the run's directory (a store) moved to the reproduction's own
(``{dir}``), values an earlier command printed bound to that answer, its stdin and variables.

A transcript step the record cannot carry (a command other than the target's, a body not kept
whole, a credential the kit was not handed) makes the record ``unrunnable``, with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from refkit.jsonvalue import loads
from conformance.reproduction.record import (
    COMMAND,
    JSON_TEXT,
    Answer,
    Answered,
    Identity,
    Reproduction,
    Step,
    TargetInfo,
    escape,
    text_json,
)
from conformance.verdicts import VerdictRecord

__all__ = ["Expectations", "ReplayTarget", "from_verdict", "target_path"]

Expectations = Callable[[Reproduction], Reproduction]  # a profile's oracle: the correct answers filled in

_DROPPED_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding", "user-agent", "accept"})
# "HTTP 409 stale_revision", "HTTP 200 (set-up step ...)"; a word that runs on ("HTTP 200 with a
# body ...") is prose, not an error code.
_EXPECTED = re.compile(r"HTTP (\d{3})(?: ([a-z][a-z0-9_]*)(?=$|[;,)]| \())?")
_CUT = re.compile(r"\.\.\. \(\d+ bytes\)$")  # a stream the report cut (conformance.transcript.shown_text)
_EXIT = re.compile(r"\bexit (\d{1,3})\b")  # a command's: "exit 0 with JSON on stdout"
_CREDENTIAL = re.compile(r"<redacted:([A-Za-z0-9_.-]+)>")
# Numbers a request carries that the server assigned, by the request's name for them -> the names
# an answer gives them under (most recent answer first). Other numbers are the check's own.
_SERVER_NUMBERS: Mapping[str, tuple[str, ...]] = {
    "expected_revision": ("revision",),
    "revision": ("revision",),
    "after_seq": ("after_seq", "seq", "project_seq"),
    "before_seq": ("next_before_seq", "project_seq", "seq"),
    "at_least_seq": ("project_seq", "seq"),
}
# Rounds of a race's groups its record sends, in as many runs as that takes (five at least),
# before the race is called not met. The record ends at the round that showed the bug, so it may
# hold a single group (AM-RACE-3's, when its first round showed it): against its variant
# (tests/suite/mutants.py stale_cache) the script needed 2 to 11 runs of one group in five
# tries, where five runs had missed half the time; late_stamp's six groups showed it in the
# first run each time.
RACE_ROUNDS = 40
_MIN_BOUND_TEXT = 10  # shorter answered strings ("pending", a role) are words, not values the server minted
_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayTarget:
    """How a run's reproductions reach its target and make identities on it."""

    url: str | None  # the base URL the run used; None: it is gone (an embedded reference)
    templates: tuple[tuple[str, str], ...] = ()  # (identity field that must be set, or "", template), first fit wins
    workdir: str = ""  # the directory the suite ran the templates in
    credential_prefix: str = ""  # new tokens look like the kit's own: prefix + 32 hex digits
    hint: str = ""  # what to start first, when the run's target is gone
    cli: tuple[str, ...] | None = None  # a command-line target's words (its command steps run them)
    config: str | None = None  # the run's target file (absolute): a replay's identities come from it
    profile: str = ""  # the run's profile, named on the replay's command line when the file does not name it

    def reproduce_command(self, repro: Reproduction, record: Path) -> str:
        """The printed replay of ``record``: ``aidememo-conformance reproduce`` naming the run's
        target file and command line, since the replay runs only what its caller names."""
        words = ["aidememo-conformance", "reproduce"]
        if self.config:
            words += ["--config", self.config]
        if self.profile:
            words += ["--profile", self.profile]
        if repro.runs_commands and self.cli:
            words += ["--cli", shlex.join(self.cli)]
        return shlex.join([*words, str(record.resolve())])

    def info(self) -> TargetInfo:
        """The record's target: the general template (the one no identity field selects)."""
        template = next((t for key, t in self.templates if not key), None) or None
        return TargetInfo(url=self.url, provision=template, workdir=self.workdir,
                          credential_prefix=self.credential_prefix, hint=self.hint,
                          keyed=tuple((key, t) for key, t in self.templates if key and t),
                          cli=shlex.join(self.cli) if self.cli else None)

    def given(self, values: Mapping[str, str]) -> bool:
        """The identity's token must be given: the template that fits it is none (a bound source, fixed tokens)."""
        return not next((t for key, t in self.templates if not key or values.get(key)), None)


def target_path(path: str | None) -> str | None:
    """The run's target file as an absolute path (None: the run had none), for a replay to name."""
    return str(Path(path).resolve()) if path else None


def _leaves(value: object, path: str = "") -> Iterator[tuple[str, str, object]]:
    """(dotted path, last key, value) of every scalar in a JSON value whose path a template can name;
    a string holding a JSON object or list (an MCP tool's text content) is read through (``~json``)."""
    if (inner := text_json(value, path)) is not None:
        yield from _leaves(inner, f"{path}.{JSON_TEXT}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if _KEY.fullmatch(str(key)):
                yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}.{index}" if path else str(index))
    else:
        yield path, path.rsplit(".", 1)[-1], value


class _Rebaser:
    """Literal request text as a template: minted ids rebased into ``{run}``, the rest escaped."""

    def __init__(self, ids: Mapping[str, str]) -> None:
        self._ids = dict(ids)
        ordered = sorted(self._ids, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(i) for i in ordered)) if ordered else None

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return escape(text)
        out, pos = [], 0
        for match in self._pattern.finditer(text):
            found = match.group()
            before, _, after = found.partition(self._ids[found])
            out += [escape(text[pos:match.start()]), escape(before), "{run}", escape(after)]
            pos = match.end()
        out.append(escape(text[pos:]))
        return "".join(out)


class _Answers:
    """The answers so far, for binding: newest first."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.seen: list[tuple[int, str, list[tuple[str, str, object]]]] = []  # (number, step name, leaves)
        self.sent: list[tuple[int, str]] = []  # (number, request text): a value sent first is ours
        self._group: tuple[object, list[tuple[int, str, Mapping[str, object]]]] = (None, [])

    def close_group(self, group: object) -> None:
        """Before a step outside the open group: that group's answers become readable. Steps sent at
        once cannot read each other's answers (none has come when they are sent)."""
        current, held = self._group
        if held and group != current:
            self._group = (None, [])
            for number, name, entry in held:
                self.add(number, name, entry)

    def add(self, number: int, name: str, entry: Mapping[str, object], group: object = None) -> None:
        if isinstance(group, int):
            self._group = (group, [*self._group[1], (number, name, entry)])
            return
        if entry.get("kind") == "command":
            self.sent.append((number, "\n".join(map(str, [*_words(entry.get("argv")), entry.get("stdin", "")]))))
        else:
            self.sent.append((number, f"{entry.get('url', '')}\n{entry.get('request_body_exact', '')}"))
        try:
            if entry.get("kind") == "command":  # JSON, or JSON lines (an mcp server's), as a command's answer reads
                data = Answered(exit=0, body=str(entry.get("stdout", "")).encode("utf-8")).json()
            else:
                data = loads(str(entry.get("response_body", "")))
        except (ValueError, LookupError):
            data = None  # not JSON, or cut at the report's bound: nothing to bind from it
        self.seen.insert(0, (number, name, list(_leaves(data)) if data is not None else []))

    def text(self, value: str) -> str | None:
        """The placeholder of an answered string equal to ``value``, if the server minted it."""
        if len(value) < _MIN_BOUND_TEXT or (self.namespace and self.namespace in value):
            return None
        found = [(number, f"{{{name}.body.{path}}}") for number, name, leaves in self.seen
                 for path, _, got in leaves if got == value]
        if not found:
            return None
        first = min(number for number, _ in found)
        if any(number <= first and value in text for number, text in self.sent):
            return None  # the check sent it before any answer held it: its own value, echoed
        return found[0][1]

    def within(self, text: str) -> list[tuple[str, str]]:
        """(value, placeholder) of every minted string of an earlier answer that ``text`` holds."""
        values = {got for _, _, leaves in self.seen for _, _, got in leaves if isinstance(got, str) and got in text}
        return [(value, bound) for value in sorted(values, key=len, reverse=True) if (bound := self.text(value))]

    def number(self, key: str, value: int) -> str | None:
        names = _SERVER_NUMBERS.get(key)
        if names is None:
            return None
        for _, name, leaves in self.seen:
            for path, last, got in leaves:
                if last in names and got == value and not isinstance(got, bool):
                    return f"{{{name}.body.{path}}}"
        return None


def _target(url: str, rebase: _Rebaser, answers: _Answers) -> str:
    parts = urlsplit(url)
    segments = [answers.text(s) or rebase(s) for s in parts.path.split("/")]
    target = "/".join(segments)
    if parts.query:
        pairs = []
        for pair in parts.query.split("&"):
            key, mark, value = pair.partition("=")
            bound = answers.number(key, int(value)) if value.isdigit() else answers.text(value)
            pairs.append(rebase(key) + mark + (bound or rebase(value)))
        target += "?" + "&".join(pairs)
    return target


def _body(text: str, rebase: _Rebaser, answers: _Answers) -> tuple[str, bool]:
    """The body as a template; whether it is JSON (bound values are then written as JSON)."""
    try:
        data = loads(text)
    except ValueError:
        return rebase(text), False
    template = rebase(text)
    for _, last, value in _leaves(data):
        if isinstance(value, str) and (bound := answers.text(value)):
            template = template.replace(json.dumps(value, ensure_ascii=False), f'"{bound}"')
        elif isinstance(value, int) and not isinstance(value, bool) and (bound := answers.number(last, value)):
            template = re.sub(rf'("{re.escape(last)}"\s*:\s*){value}(?![0-9.eE])', lambda m: m.group(1) + bound, template)
    return template, True


def _expected(entry: Mapping[str, object], departed: str) -> tuple[Answer, ...]:
    text = departed or str(entry.get("expected") or "")
    if entry.get("kind") == "command":
        ran = _EXIT.search(text)
        return (Answer(exit=int(ran.group(1))),) if ran and int(ran.group(1)) <= 255 else ()
    match = _EXPECTED.search(text)
    return (Answer(status=int(match.group(1)), code=match.group(2)),) if match else ()


def _words(value: object) -> list[str]:
    return [str(word) for word in value] if isinstance(value, list) else []


def _bound_text(text: str, rebase: _Rebaser, answers: _Answers) -> str:
    """Free text (a word, a variable, stdin) as a template: minted values bound, ids rebased."""
    template = rebase(text)
    for value, bound in answers.within(text):
        template = template.replace(escape(value), bound)
    return template


def _command(entry: Mapping[str, object], name: str, replay: ReplayTarget, rebase: _Rebaser,
             answers: _Answers) -> Step | str:
    """A command step, or why it cannot be one."""
    argv, cli = _words(entry.get("argv")), list(replay.cli or ())
    if not cli or argv[:len(cli)] != cli:
        return f"{name} runs a command other than the target's command line"
    stdin = str(entry.get("stdin") or "")
    if _CUT.search(stdin):
        return f"{name}: its stdin is not kept whole in the report"
    words = []
    for word in argv[len(cli):]:
        template = _bound_text(word, rebase, answers)
        if word.startswith("/") and "{run}" in template:  # a file of the check's, under the run's directory
            template = "{dir}/" + rebase(word.rsplit("/", 1)[1])
        words.append(template)
    env = entry.get("env")
    return Step(name=name, method=COMMAND, target="", argv=tuple(words),
                env=tuple((str(k), _bound_text(str(v), rebase, answers)) for k, v in
                          (env.items() if isinstance(env, dict) else ())),
                body=_bound_text(stdin, rebase, answers) if stdin else None)


def _headers(entry: Mapping[str, object], rebase: _Rebaser) -> tuple[tuple[tuple[str, str], ...], str]:
    """The step's headers as templates, or why one cannot be sent."""
    out = []
    pairs = entry.get("replay_headers")
    for pair in pairs if isinstance(pairs, list) else []:
        name, value = str(pair[0]), str(pair[1])
        if name.lower() in _DROPPED_HEADERS:
            continue
        if "<redacted>" in value:
            return (), f"it sent a {name} header the report does not keep (a credential the kit was not handed)"
        pieces = _CREDENTIAL.split(value)  # text, label, text, label, ...
        out.append((name, "".join(rebase(p) if k % 2 == 0 else f"{{token.{p}}}" for k, p in enumerate(pieces))))
    return tuple(out), ""


def _kept(entries: Sequence[Mapping[str, object]]) -> list[int]:
    """Indexes of the entries a reproduction sends: not a 503 the kit resent identically."""
    kept = []
    for index, entry in enumerate(entries):
        following = entries[index + 1] if index + 1 < len(entries) else None
        resent = following is not None and all(following.get(k) == entry.get(k)
                                               for k in ("method", "url", "request_body_exact"))
        if not (entry.get("status") == 503 and resent):
            kept.append(index)
    return kept


def _first(reason: str) -> str:
    line = reason.splitlines()[0] if reason else "no reason given"
    return line if len(line) <= 160 else line[:157] + "..."


def from_verdict(record: VerdictRecord, replay: ReplayTarget, expectations: Expectations | None = None) -> Reproduction:
    """The reproduction of a check that did not pass (see the module docstring); ``expectations``
    is the profile's oracle, filling in what a correct server answers."""
    rebase = _Rebaser(record.ids)
    answers = _Answers(record.namespace)
    steps: list[Step] = []
    unrunnable = ""
    stated = ""  # the step the check departed from, whose expectation it stated
    for number, index in enumerate(_kept(record.transcript), start=1):
        entry = record.transcript[index]
        name = f"step{number}"
        stated = name if record.failed_step == index else stated
        group = entry.get("group")
        answers.close_group(group)
        if entry.get("kind") == "command":
            made = _command(entry, name, replay, rebase, answers)
            if isinstance(made, str):
                unrunnable = unrunnable or made
                continue
            steps.append(dataclasses.replace(
                made, group=group if isinstance(group, int) else None, note=str(entry.get("actor") or ""),
                expect=_expected(entry, record.expected if record.failed_step == index else "")))
            answers.add(number, name, entry, group)
            continue
        if entry.get("kind") == "bulk":
            unrunnable = unrunnable or (f"{name} stands for {entry.get('count')} set-up requests the report does not "
                                        f"keep one by one ({entry.get('request')}); rerun the check with its command")
            continue
        if entry.get("kind", "http") != "http":
            unrunnable = unrunnable or f"{name} is a {entry.get('kind')} step; only HTTP and command steps are reproduced"
            continue
        headers, why = _headers(entry, rebase)
        body_text = entry.get("request_body_exact")
        if body_text is None and entry.get("request_body"):
            why = why or "its body is not kept whole in the report (binary, or too long)"
        if why:
            unrunnable = unrunnable or f"{name}: {why}"
            continue
        body, is_json = _body(str(body_text), rebase, answers) if body_text else (None, False)
        lane = entry.get("lane")
        steps.append(Step(name=name, method=str(entry.get("method", "GET")),
                          target=_target(str(entry.get("url", "")), rebase, answers), headers=headers, body=body,
                          json_body=is_json, group=group if isinstance(group, int) else None,
                          lane=lane if isinstance(lane, int) and isinstance(group, int) else None,
                          expect=_expected(entry, record.expected if record.failed_step == index else ""),
                          note=str(entry.get("actor") or ""), cleanup=entry.get("cleanup") is True))
        answers.add(number, name, entry, group)
    people = tuple(Identity(label=label, values=tuple((k, rebase(v)) for k, v in values.items()),
                            given=replay.given(values))
                   for label, values in record.identities.items())
    grouped = {s.group for s in steps if s.group is not None}
    if expectations is None and not unrunnable and not any(s.expect for s in steps if s.name == stated):
        # No reference to pin what a correct answer is, and the check's judgement is no status or
        # exit code a step states: replayed, every answer would hold, and the script would call a
        # buggy target correct.
        unrunnable = (f"the check judged more than a status or exit code ({_first(record.reason)}), and this "
                      f"profile has no reference to pin the rest; rerun the check with its printed command")
    repro = Reproduction(
        title=f"{record.check} ({record.requirement}, {record.level}; it read {record.verdict})",
        origin="suite", requirements=(record.requirement,), identities=people, steps=tuple(steps),
        race=(f"{len(grouped)} group(s) of requests sent at once; the server decides their order."
              if grouped else ""), tries=max(5, -(-RACE_ROUNDS // len(grouped))) if grouped else 1, unrunnable=unrunnable, target=replay.info(),
        context=f"The check said: {record.reason.splitlines()[0] if record.reason else record.verdict}")
    return expectations(repro) if expectations is not None and not unrunnable else repro
