"""The one script writer: a reproduction record as a POSIX shell script that needs no kit.

The script makes a private directory (``umask 077``, deleted on exit), provisions every identity
of the record with the target's template in a fresh namespace ``RUN`` (run where the kit ran it,
not through a shell), each with a new token in a file of its own, then sends the record's steps
with ``curl``, group by group: a group's requests are background jobs released together once
all are started (a barrier on a flag file). Before each request it says what it sends and what
a correct server answers; after it, the answer (every token hidden) and whether it holds.
Filling templates from earlier answers and judging answers is ``record``'s code, carried in
the script with ``engine`` and run with ``python3`` (3.10 or later, standard library only), isolated
(``-I -S``: no environment variables, user site or site-packages, whose start-up hooks cost about
0.1 s of every one of the script's python3 starts, one per group).

A record with command steps (a CLI target's) runs the target's command line, ``CLI`` (by
default the run's), in a directory of its own made anew for each try (``{dir}``, where the
command's store lives): the engine writes each step's words and variables shell-quoted, the
script runs them with ``eval``, stdin from a file, and keeps the exit status, stdout and stderr.

A record with a ``RESTART`` step (a fault finding's) also needs the server's PID file and the
command that starts it (``SERVER_PID_FILE``, ``RESTART_COMMAND``): there the script sends
SIGKILL to that process, runs the command again in the background (its PID written back to the
file), and waits until ``/health`` answers 200.

Exit status: 1 the bug shows, 0 it does not, 2 it cannot run (the reason is printed), 3 a race
the script cannot force did not show in ``TRIES`` runs (the first line says it is such a race).
No token is ever on a command line, in ``set -x`` output or on the terminal.
"""

from __future__ import annotations

import inspect
import json
import re
import secrets
import shlex

from conformance.reproduction import engine, record
from conformance.reproduction.record import Identity, Reproduction, identity_argv

__all__ = ["render_script"]

_RUN_MARK, _FILE_MARK = "\0run\0", "\0file\0"


def _engine_source() -> str:
    """``record`` and ``engine`` as one standalone file (the engine's import of record dropped)."""
    own = inspect.getsource(engine)
    own = re.sub(r"^from __future__ import annotations\n", "", own, flags=re.M)
    own = re.sub(r"^from conformance\.reproduction\.record import .*\n", "", own, flags=re.M)
    return inspect.getsource(record) + "\n\n# -- the script side (conformance.reproduction.engine) --\n" + own


def _heredoc(path: str, text: str) -> list[str]:
    mark = f"END_{secrets.token_hex(6).upper()}"
    while mark in text:
        mark = f"END_{secrets.token_hex(6).upper()}"
    return [f"cat > \"$WORK/{path}\" <<'{mark}'", text.rstrip("\n"), mark]


def _sh_word(text: str, label: str) -> str:
    """A provisioning word: markers become "$RUN" and the identity's token file; the rest quoted."""
    pieces = re.split("(\0[a-z]+\0)", text)
    spliced = {_RUN_MARK: '"$RUN"', _FILE_MARK: f'"$WORK/token.{label}"'}
    return "".join(spliced.get(p) or (shlex.quote(p) if p else "") for p in pieces) or "''"


def _var(label: str) -> str:
    return "TOKEN_FILE_" + re.sub(r"[^A-Za-z0-9_]", "_", label).upper()


def _value_var(label: str) -> str:
    return "TOKEN_" + re.sub(r"[^A-Za-z0-9_]", "_", label).upper()


def _identity(who: Identity, repro: Reproduction) -> list[str]:
    """The lines making one identity: the template when it fits, else a token file the user names."""
    values = {k: v.replace("{run}", _RUN_MARK) for k, v in who.values}
    template = repro.target.template(values)
    words = identity_argv(template, values, _FILE_MARK, shlex.split) if template and not who.given else None
    shown = ", ".join(f"{k} {v}" for k, v in who.values).replace("{run}", "$RUN")
    if words is None:  # a token file (TOKEN_FILE_X) or the token itself (TOKEN_X, the simulator's way)
        var, value = _var(who.label), _value_var(who.label)
        return [f"  if [ -n \"${{{var}:-}}\" ]; then tr -d '\\n' < \"${var}\" > \"$WORK/token.{who.label}\" || return 2",
                f"  elif [ -n \"${{{value}:-}}\" ]; then printf '%s\\n' \"${value}\" > \"$WORK/token.{who.label}\"",
                f"  else echo \"cannot run: set {var} to a file holding the token of {_quoted(shown)} (or {value} "
                "to the token)\"; return 2; fi"]
    workdir = shlex.quote(repro.target.workdir or ".")
    prefix = shlex.quote(repro.target.credential_prefix) if repro.target.credential_prefix else "''"
    return [f"  echo \"provisioning {who.label}: {_quoted(shown)}\"",
            f"  printf '%s%s\\n' {prefix} \"$(token)\" > \"$WORK/token.{who.label}\"",
            f"  if ! (cd {workdir} && {' '.join(_sh_word(w, who.label) for w in words)}) > \"$WORK/out\" 2>&1; then",
            "    engine hide 0 < \"$WORK/out\"",
            f"    echo 'cannot run: provisioning {who.label} with the target'\"'\"'s template failed'",
            "    return 2",
            "  fi"]


def _quoted(text: str) -> str:
    """Text for inside a double-quoted sh word, ``$RUN`` left to expand."""
    return re.sub(r'(["\\`])', r"\\\1", text).replace("$", "\\$").replace("\\$RUN", "$RUN")


def _transfer(step_name: str, method: str, body: bool, status: str) -> list[str]:
    """curl's options for one request (repeated after each ``--next``, which resets them)."""
    verb = ["-I"] if method == "HEAD" else ["-X", method]
    data = [f"--data-binary @\"$WORK/{step_name}.body\""] if body else []
    return ["-sS", "-g", "--path-as-is", *verb, "-H", f"@\"$WORK/{step_name}.headers\"", *data,
            "-D", f"\"$WORK/{step_name}.head\"", "-o", f"\"$WORK/{step_name}.out\"", "-w", status,
            f"\"$(cat \"$WORK/{step_name}.url\")\""]


def _curl(step_name: str, method: str, body: bool) -> str:
    return " ".join(["curl", *_transfer(step_name, method, body, "'%{http_code}'"),
                     f"> \"$WORK/{step_name}.status\"", f"2> \"$WORK/{step_name}.err\""])


def _lane(lane: list[record.Step], tag: str) -> str:
    """A lane's steps one after another. Requests only: one curl, the next request sent as its
    answer comes (``--next``, on the same connection), where a curl process apiece left a gap
    of tens of milliseconds on a loaded machine, and a read meant to land while the other lanes'
    writes were in flight landed after them (AM-RACE-3's script missed 40 tries in a row)."""
    if len(lane) == 1 or any(step.method in (record.COMMAND, record.RESTART) for step in lane):
        return "; ".join(_send(step) for step in lane)
    first = lane[0].name
    words = " --next ".join(" ".join(_transfer(step.name, step.method, step.body is not None, "'%{http_code}\\n'"))
                            for step in lane)
    split = [f"sed -n {n}p \"$WORK/{tag}.status\" > \"$WORK/{step.name}.status\"" for n, step in enumerate(lane, 1)]
    copies = [f"cp \"$WORK/{first}.err\" \"$WORK/{step.name}.err\"" for step in lane[1:]]
    return "; ".join([f"curl {words} > \"$WORK/{tag}.status\" 2> \"$WORK/{first}.err\"", *split, *copies])


_RESTART_LINES = [
    "restart_server() {",
    "  kill -9 \"$(cat \"$SERVER_PID_FILE\")\" 2>/dev/null || { echo \"cannot run: no server process with the pid "
    "in $SERVER_PID_FILE\"; return 2; }",
    "  sh -c \"exec $RESTART_COMMAND\" >> \"${SERVER_LOG:-/dev/null}\" 2>&1 &",
    "  echo $! > \"$SERVER_PID_FILE\"",
    "  n=0",
    "  until [ \"$(curl -s -o /dev/null -w '%{http_code}' \"$BASE_URL/health\")\" = 200 ]; do",
    "    n=$((n + 1)); [ \"$n\" -le 600 ] || { echo 'cannot run: the restarted server did not answer /health in 60 s'; "
    "return 2; }",
    "    sleep 0.1",
    "  done",
    "}",
]


def _exec(step_name: str) -> str:
    files = f"\"$WORK/{step_name}"
    return (f"(cd \"$WORK/d\" && eval \"env $(cat {files}.env\") $CLI $(cat {files}.args\")\") < {files}.body\" "
            f"> {files}.out\" 2> {files}.err\"; echo $? > {files}.exit\"")


def _send(step: record.Step) -> str:
    return _exec(step.name) if step.method == record.COMMAND else _curl(step.name, step.method, step.body is not None)


def _group(index: int, batch: list[record.Step]) -> list[str]:
    verb = "render" if index == 0 else "next"  # next: the group before is judged first
    lines = [f"  engine {verb} {index} \"$BASE_URL\" || return $?"]
    if len(batch) == 1 and batch[0].method == record.RESTART:
        lines.append("  restart_server || return 2")
    elif len(batch) == 1:
        lines.append(f"  {_send(batch[0])}")
    else:
        # A barrier: every job (a lane: its steps one after another) starts, says it is ready, and
        # waits for the flag; the flag is set once all are ready, so the requests leave within a
        # millisecond of each other.
        lanes = record.Reproduction.lanes(batch)
        for k, lane in enumerate(lanes):
            sent = _lane(lane, f"lane.{index}.{k}")
            lines.append(f"  ( : > \"$WORK/ready.{index}.{k}\"; until [ -e \"$WORK/go.{index}\" ]; do sleep 0.001; done; "
                         f"{sent} ) &")
        ready = f"$(ls \"$WORK\" | grep -c '^ready\\.{index}\\.')"
        lines.append(f"  until [ \"{ready}\" -ge {len(lanes)} ]; do sleep 0.001; done")
        lines += [f"  : > \"$WORK/go.{index}\"", "  wait"]
    return lines


def _comments(repro: Reproduction) -> list[str]:
    first = (f"CANNOT RUN: {repro.cannot_run}. It exits 2." if repro.cannot_run else
             f"RACE, NOT FORCED: {repro.race} A script cannot force this interleaving: it tries {repro.tries} "
             "times and exits 3 when the bug never showed." if repro.race else f"Reproduces: {repro.title}")
    lines = [first, *([f"Reproduces: {repro.title}"] if repro.race or repro.cannot_run else [])]
    if repro.requirements:
        lines.append(f"Requirements: {', '.join(repro.requirements)}.")
    lines += [f"Found by: {repro.origin}."] + [f"  {line}" for line in repro.context.splitlines()[:12]]
    lines += ["It provisions fresh identities (namespace RUN) with the target's template, sends the steps with curl",
              "(a group's at once) and compares each answer with what a correct server answers; values the server",
              "assigns (epochs, cursors, revisions) are read from the earlier answers, never copied from a past run.",
              "Needs sh, curl and python3 (3.10+, standard library). Tokens stay in 0600 files of a directory it",
              "makes and deletes; none is printed.",
              "Exit: 1 the bug shows; 0 it does not; 2 it cannot run (the reason is printed); 3 a race it cannot",
              "force did not show (inconclusive). BASE_URL, TRIES and RUN may be set."]
    if repro.runs_commands:
        lines.append("Command steps run CLI (the target's command line, shell words) in a fresh directory DIR.")
    if repro.target.hint:
        lines.append(repro.target.hint)
    return [f"# {line}" for line in lines]


def render_script(repro: Reproduction) -> str:
    """The shell script of ``repro`` (see the module docstring)."""
    url = repro.target.url
    lines = ["#!/bin/sh", *_comments(repro), "set -u"]
    if repro.race:
        lines.append(f"echo {shlex.quote('RACE, NOT FORCED: ' + repro.race)}")
    if repro.cannot_run:
        lines += [f"echo {shlex.quote('cannot run: ' + repro.cannot_run)}", "exit 2"]
        return "\n".join(lines) + "\n"
    if repro.restarts:
        lines += ["[ -n \"${SERVER_PID_FILE:-}\" ] && [ -n \"${RESTART_COMMAND:-}\" ] || { echo 'cannot run: this "
                  "record kills and restarts the server: set SERVER_PID_FILE to a file holding its pid and "
                  "RESTART_COMMAND to the command that starts it again'; exit 2; }", *_RESTART_LINES]
    if repro.runs_commands:
        cli = repro.target.cli
        lines.append(f"CLI=${{CLI:-{shlex.quote(cli)}}}" if cli else
                     "[ -n \"${CLI:-}\" ] || { echo 'cannot run: set CLI to the command line of the target'; exit 2; }")
    lines += [
        "command -v curl >/dev/null 2>&1 || { echo 'cannot run: curl is not installed'; exit 2; }",
        "python3 -I -S -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null "
        "|| { echo 'cannot run: python3 3.10 or later is needed to read the answers'; exit 2; }",
        f"BASE_URL=${{BASE_URL:-{shlex.quote(url)}}}" if url else
        "BASE_URL=${BASE_URL:-}" if all(step.method == record.COMMAND for step in repro.steps) else
        "[ -n \"${BASE_URL:-}\" ] || "
        "{ echo 'cannot run: set BASE_URL to the target (the run used one that is gone)'; exit 2; }",
        f"TRIES=${{TRIES:-{repro.tries}}}",
        "umask 077",
        "WORK=$(mktemp -d) || { echo 'cannot run: no temporary directory'; exit 2; }",
        "trap 'rm -rf \"$WORK\"' EXIT",
        *_heredoc("engine.py", _engine_source()),
        *_heredoc("record.json", json.dumps(repro.to_json(), indent=1, ensure_ascii=False)),
        "engine() { python3 -I -S \"$WORK/engine.py\" \"$WORK/record.json\" \"$WORK\" \"$@\"; }",
        "token() { od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'; }",
        "attempt() {",
        "  rm -rf \"$WORK\"/step* \"$WORK\"/token.* \"$WORK\"/ready.* \"$WORK\"/go.* \"$WORK/d\"",
        "  mkdir \"$WORK/d\" || { echo 'cannot run: no directory for the run'; return 2; }",
        "  RUN=${FIXED_RUN:-r$(od -An -N4 -tx1 /dev/urandom | tr -d ' \\n')}",
        "  printf '%s\\n' \"$RUN\" > \"$WORK/run\"",
        "  echo \"namespace $RUN\"",
    ]
    for who in repro.identities:
        lines += _identity(who, repro)
    groups = repro.groups()
    for index, batch in enumerate(groups):
        lines += _group(index, batch)
    lines += [f"  engine judge {len(groups) - 1} || return $?", "  return 0", "}"]
    cleanups = [step for step in repro.steps if step.cleanup and step.method not in (record.COMMAND, record.RESTART)]
    if cleanups:  # sent, unjudged, when an attempt stopped before them (a held test clock's release)
        lines += ["finish() {", "  engine cleanup 0 \"$BASE_URL\" || return 0",
                  *(f"  [ -e \"$WORK/{s.name}.url\" ] && [ ! -e \"$WORK/{s.name}.status\" ] && "
                    f"{_curl(s.name, s.method, s.body is not None)}" for s in cleanups), "  return 0", "}"]
    lines += ["FIXED_RUN=${RUN:-}",
              "try=1",
              "while [ \"$try\" -le \"$TRIES\" ]; do",
              "  attempt; status=$?" + ("; [ \"$status\" -eq 0 ] || finish" if cleanups else ""),
              "  case $status in 0) ;; 1) echo 'RESULT: the bug shows (exit 1)'; exit 1 ;;",
              "    *) echo 'RESULT: cannot run (exit 2)'; exit 2 ;; esac",
              "  try=$((try + 1))",
              "done"]
    if repro.race:
        lines += ["echo \"RESULT: the race did not show in $TRIES tries; a script cannot force it, so this is no proof "
                  "(exit 3)\"", "exit 3"]
    else:
        lines += ["echo 'RESULT: every answer is what a correct server answers: the bug does not show (exit 0)'", "exit 0"]
    return "\n".join(lines) + "\n"
