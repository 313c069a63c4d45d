"""The shell script of a case file: one check's requests again, in a new namespace, against a target.

The script does what the check did, without the kit:

1. makes a private directory (``umask 077``, deleted on exit) and a new namespace ``RUN`` (give
   ``RUN=<the run tag>`` to replay the exact ids, into a database that has never seen them);
2. provisions every identity the check had with the target's own bootstrap command, generated
   from the run's template (run in the directory the suite ran it in, and, as there, not
   through a shell), each with a new token written to a file of its own that nobody echoes;
   identities the template cannot make (fixed tokens, a hook) are read from ``TOKEN_FILE_<label>``;
3. sends each recorded request (curl for HTTP, the command line for runs) with every id the
   check minted rebased into ``RUN``, credentials read from those files (``curl -H @file``), and
   before each answer says what the check expected of it, marking the step that departed. A step
   may capture a field of its answer (``capture``: name, JSON field) that later words read as
   ``<captured:NAME>``: a value the server mints, like a project's epoch.

No token is ever on a command line, in ``set -x`` output or on the terminal: what a server
answers is shown through a filter that hides every token of the script. A step whose request
the report does not hold whole (a body beyond ``REPLAYED_BODY_BYTES``, a credential the kit was
not handed) is not sent, and the script says so.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from conformance.verdicts import VerdictRecord

__all__ = ["ReplayTarget", "replay_script"]

_HIDDEN_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding"})
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Shown output goes through this: every token the script holds (one per line of $WORK/tokens) is hidden.
_SHOW = ("show() {\n  awk -v tokens=\"$WORK/tokens\" 'BEGIN { while ((getline t < tokens) > 0) if (t != \"\") s[++n] = t }\n"
         "  { for (i = 1; i <= n; i++) while ((p = index($0, s[i])) > 0)"
         " $0 = substr($0, 1, p - 1) \"<redacted>\" substr($0, p + length(s[i])); print }'\n}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayTarget:
    """How a case file's script reaches the run's target and makes identities on it."""

    url: str | None  # the base URL the run used; None: it is gone (an embedded reference)
    templates: tuple[tuple[str, str], ...] = ()  # (identity field that must be set, or "", template), first fit wins
    workdir: str = ""  # the directory the suite ran the templates in
    credential_prefix: str = ""  # new tokens look like the kit's own: prefix + 32 hex digits
    hint: str = ""  # what to start first, when the run's target is gone


class _Shell:
    """Renders recorded text as one double-quoted sh word, rebasing what a replay must make anew."""

    def __init__(self, record: VerdictRecord, url: str | None) -> None:
        self.ids = dict(record.ids)
        # ``<base-url>``: a request recorded without its target's URL (diff's steps).
        parts = [f"(?P<url>{re.escape(url)}|<base-url>)" if url else "(?P<url><base-url>)"]
        if self.ids:
            parts.append("(?P<id>" + "|".join(re.escape(i) for i in sorted(self.ids, key=len, reverse=True)) + ")")
        parts += [r"<captured:(?P<capture>[A-Z_]+)>", r"<redacted:(?P<label>[A-Za-z0-9_.-]+)>", r"<token-file:(?P<file>[A-Za-z0-9_.-]+)>",
                  r"(?P<unkept><redacted>)"]
        self._pattern = re.compile("|".join(parts))
        self.labels: set[str] = set()  # the labels whose tokens the rendered words read

    def word(self, text: str, *, secrets: bool = True) -> str | None:
        """``text`` as a sh word (None when it holds a credential the report does not keep).

        With ``secrets`` false (an ``echo``), a credential stays its label and is never read.
        """
        out, pos = ['"'], 0
        for match in self._pattern.finditer(text):
            out.append(_quoted(text[pos:match.start()]))
            pos = match.end()
            group, found = match.lastgroup, match.group()
            if group == "url":
                out.append("${BASE_URL}")
            elif group == "id":
                before, _, after = found.partition(self.ids[found])
                out.append(f"{_quoted(before)}${{RUN}}{_quoted(after)}")
            elif group == "file":
                out.append(f'$WORK/{match.group("file")}.token')
            elif group == "capture":  # a value the server minted, no secret
                out.append(f'$(cat "$WORK/{match.group("capture")}.value")')
            elif not secrets:
                out.append(_quoted(found))
            elif group == "label":
                self.labels.add(match.group("label"))
                out.append(f'$(cat "$WORK/{match.group("label")}.token")')
            else:
                return None
        if pos == 0:  # nothing to rebase or read: the plainest quoting
            return shlex.quote(text)
        out.append(_quoted(text[pos:]) + '"')
        return "".join(out)

    def shown(self, text: str) -> str:
        """An ``echo`` argument: rebased, credentials named, never expanded."""
        word = self.word(text, secrets=False)
        assert word is not None
        return word


def _quoted(literal: str) -> str:
    return re.sub(r'(["\\$`])', r"\\\1", literal)


def _template(template: str, values: Mapping[str, str], label: str) -> str | None:
    """The words of ``template`` filled for one identity; ``{token_file}`` is the script's file."""
    filled = []
    for word in shlex.split(template):
        missing = [name for name in _PLACEHOLDER.findall(word) if name != "token_file" and name not in values]
        if missing:
            return None
        filled.append(_PLACEHOLDER.sub(lambda m: f"<token-file:{label}>" if m.group(1) == "token_file"
                                       else values[m.group(1)], word))
    return "\0".join(filled)


def _provision(shell: _Shell, record: VerdictRecord, target: ReplayTarget | None) -> tuple[list[str], set[str]]:
    """The lines making the check's identities; the labels they made."""
    lines: list[str] = []
    made: set[str] = set()
    for label, values in record.identities.items():
        template = next((t for key, t in (target.templates if target else ()) if not key or values.get(key)), None)
        filled = _template(template, values, label) if template else None
        words = [shell.word(w) for w in filled.split("\0")] if filled else None
        if not words or any(w is None for w in words):
            continue
        prefix = target.credential_prefix if target else ""
        where = shell.shown(", ".join(f"{k} {v}" for k, v in values.items()))
        lines += [f"echo {where}",
                  f"printf '%s\\n' \"{_quoted(prefix)}$(token)\" > \"$WORK/{label}.token\"",
                  f"if ! (cd {shlex.quote(target.workdir if target and target.workdir else '.')} && "
                  f"{' '.join(w for w in words if w)}) > \"$WORK/out\" 2>&1; then",
                  "  show < \"$WORK/out\"",
                  f"  echo {shlex.quote(f'provisioning {label} failed')} >&2",
                  "  exit 1",
                  "fi",
                  "show < \"$WORK/out\"",
                  f"cat \"$WORK/{label}.token\" >> \"$WORK/tokens\""]
        made.add(label)
    return lines, made


def _http(shell: _Shell, entry: Mapping[str, object], number: int) -> list[str] | str:
    """The lines of one HTTP step, or why it cannot be sent as recorded."""
    method = str(entry.get("method", "GET"))
    url = shell.word(str(entry.get("url", "")))
    if url is None:
        return "its URL holds a credential the report does not keep"
    words = ["curl", "-sS", "-g", "--path-as-is", *(["-I"] if method == "HEAD" else ["-i", "-X", method])]
    lines: list[str] = []
    headers = entry.get("replay_headers")
    for index, pair in enumerate(headers if isinstance(headers, list) else []):
        name, value = str(pair[0]), str(pair[1])
        if name.lower() in _HIDDEN_HEADERS:
            continue
        line = shell.word(f"{name}: {value}")
        if line is None:
            return f"it sent a {name} header the report does not keep (a credential the kit was not handed)"
        if "$(cat " in line:  # a credential: from a file, never on the command line
            lines.append(f"printf '%s\\n' {line} > \"$WORK/step{number}-header{index}\"")
            words += ["-H", f"@\"$WORK/step{number}-header{index}\""]
        else:
            words += ["-H", line]
    body = entry.get("request_body_exact")
    if body is None and entry.get("request_body"):
        return "its body is not kept whole in the report (binary, or too long for a script)"
    if body:
        data = shell.word(str(body))
        if data is None:
            return "its body holds a credential the report does not keep"
        lines.append(f"printf '%s' {data} > \"$WORK/step{number}.body\"")
        words += ["--data-binary", f"@\"$WORK/step{number}.body\""]
    words.append(url)
    lines += [f"{' '.join(words)} > \"$WORK/out\" 2>&1 || true", "show < \"$WORK/out\"", "echo"]
    capture = entry.get("capture")
    if isinstance(capture, list) and len(capture) == 2:
        name, key = (re.sub(r"[^A-Za-z0-9_]", "", str(part)) for part in capture)
        lines.append(f"sed -n 's/.*\"{key}\" *: *\"\\([^\"]*\\)\".*/\\1/p' \"$WORK/out\" | head -n 1 > "
                     f"\"$WORK/{name}.value\"")
    return lines


def _command(shell: _Shell, entry: Mapping[str, object]) -> list[str] | str:
    words: list[str] = []
    env = entry.get("env")
    for name, value in (env.items() if isinstance(env, dict) else []):
        rendered = shell.word(str(value))
        if rendered is None:
            return f"its variable {name} holds a credential the report does not keep"
        words.append(f"{name}={rendered}")
    argv = entry.get("argv")
    for item in argv if isinstance(argv, list) else []:
        rendered = shell.word(str(item))
        if rendered is None:
            return "its command line holds a credential the report does not keep"
        words.append(rendered)
    feed = ""
    if entry.get("stdin"):
        stdin = shell.word(str(entry["stdin"]))
        if stdin is None:
            return "its input holds a credential the report does not keep"
        feed = f"printf '%s' {stdin} | "
    return [f"status=0; {feed}{' '.join(words)} > \"$WORK/out\" 2>&1 || status=$?", "show < \"$WORK/out\"",
            "echo \"(exit status $status)\"", "echo"]


def _headline(shell: _Shell, record: VerdictRecord, entry: Mapping[str, object], index: int, total: int,
              departed: str) -> str:
    kind = entry.get("kind", "http")
    what = (f"{entry.get('method')} {entry.get('url')}" if kind == "http"
            else f"$ {' '.join(str(w) for w in argv)}" if kind == "command" and isinstance(argv := entry.get("argv"), list)
            else str(entry.get("summary", kind)))
    actor = f" as {entry['actor']}" if entry.get("actor") else ""
    expected = str(entry.get("expected") or "") or "not stated by a helper (the check's own assertion judges it)"
    line = f"--- step {index + 1} of {total}: {what}{actor}; expected: {expected}"
    if record.failed_step == index:
        line += f" <- {departed} (the run got {_received(entry)})"
    return f"echo {shell.shown(line)}"


def _received(entry: Mapping[str, object]) -> str:
    if entry.get("kind", "http") == "http":
        return f"HTTP {entry.get('status') or 'no answer'}"
    return f"exit {entry.get('exit_code')}"


def _steps(shell: _Shell, record: VerdictRecord, departed: str) -> list[str]:
    lines: list[str] = []
    entries = record.transcript
    for index, entry in enumerate(entries):
        lines.append(_headline(shell, record, entry, index, len(entries), departed))
        kind = entry.get("kind", "http")
        rendered = (_http(shell, entry, index + 1) if kind == "http" else _command(shell, entry) if kind == "command"
                    else f"the kit does not replay {kind} steps")
        if isinstance(rendered, str):
            lines.append(f"echo {shlex.quote(f'(not sent: {rendered})')}")
        else:
            lines += rendered
    if record.failed_step is None and record.reason:
        last = record.reason.splitlines()[0]
        lines.append(f"echo {shell.shown(f'--- the check then judged: {last}')}")
    return lines


def _header(record: VerdictRecord, target: ReplayTarget | None, intro: tuple[str, ...]) -> list[str]:
    lines = ["#!/bin/sh", *(f"# {line}" for line in intro or (
             f"Replays {record.check} ({record.requirement}, {record.level}; it read {record.verdict}).",
             "It provisions new identities in a new namespace RUN, sends the check's requests there and says,",
             "before each answer, what the check expected. Tokens stay in 0600 files of a directory it makes",
             "and deletes; none is printed. RUN=<run tag> replays the exact ids (into a wiped database)."))]
    if target is not None and target.hint:
        lines.append(f"# {target.hint}")
    lines += [f"# {note}" for note in record.notes]
    default_url = shlex.quote(target.url) if target is not None and target.url else ""
    lines += ["set -eu",
              f"BASE_URL=${{BASE_URL:-{default_url}}}" if default_url else
              ': "${BASE_URL:?set BASE_URL to the target (the run used a server that is gone)}"',
              "RUN=${RUN:-r$(od -An -N4 -tx1 /dev/urandom | tr -d ' \\n')}",
              "umask 077",
              "WORK=$(mktemp -d)",
              "trap 'rm -rf \"$WORK\"' EXIT",
              "token() { od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'; }",
              *_SHOW.splitlines(),
              ": > \"$WORK/tokens\""]
    return lines


def replay_script(record: VerdictRecord, target: ReplayTarget | None = None, *, intro: tuple[str, ...] = (),
                  departed: str = "the check failed here") -> str:
    """The case file's script for ``record`` (see the module docstring).

    ``intro`` replaces the opening comment's lines; ``departed`` marks the step that departed.
    """
    shell = _Shell(record, target.url if target is not None else None)
    provision, made = _provision(shell, record, target)
    steps = _steps(shell, record, departed)
    given = sorted(shell.labels - made)
    supplied = []
    for label in given:
        where = f"{label} (" + ", ".join(f"{k} {v}" for k, v in record.identities.get(label, {}).items()) + ")"
        supplied += [f": \"${{TOKEN_FILE_{_var(label)}:?set TOKEN_FILE_{_var(label)} to a file holding the token "
                     f"of {_quoted(where)}}}\"",
                     f"tr -d '\\n' < \"$TOKEN_FILE_{_var(label)}\" > \"$WORK/{label}.token\"",
                     f"cat \"$WORK/{label}.token\" >> \"$WORK/tokens\"", "echo >> \"$WORK/tokens\""]
    return "\n".join(_header(record, target, intro) + supplied + provision + steps) + "\n"


def _var(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", label)
