"""A failure's standalone exports: a pytest file and a curl script, written from a replay document.

Both send the plan again with fresh ids in the target's project, never the ids or the project of
the recorded run. The pytest file calls ``simulations.replay`` (so it judges with the model); the
curl script is for servers a user cannot reach from Python: it prints each answer beside the one
recorded and, for the operations the checker blamed, the answers the model allowed, and exits 1
when such an answer is none of them. Neither ever holds or prints a token: the pytest file asks
the replay's target for one, the script reads ``TOKEN_<ACTOR>`` variables or provisions its own
with the target file's command (no ``set -x``; a token reaches curl on its standard input).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from simulations.ledger import LEDGER, answer_parts, describe_answer
from simulations.plan import READER, Plan, PlannedOp, marked_run
from simulations.planner import setup_requests
from simulations.targets import SIM_TENANT, token_variable

__all__ = ["URL_TIMES", "curl_text", "pytest_text"]

URL_TIMES = 5  # reruns of the exported test over a URL: the network interleaves, a race may need several
_RUN = "@RUN@"
_PROJECT = "@PROJECT@"
_SPLICE = re.compile(f"({_RUN}|{_PROJECT})")


_PYTEST_TEMPLATE = '''"""Regression test exported by aidememo-sim from a recorded race (seed {seed}).

It fails while the race is present. Run: pytest {name}
{where}"""

import json

import pytest

from simulations.replay import replay_target, reproduce

REPLAY = json.loads({doc!r})
TIMES = {times}


@pytest.fixture(scope="module")
def target():
    """Where the requests go (None: the embedded reference); a target that cannot be found is
    an error of the test's setup, never a failure."""
    return replay_target(REPLAY)


def test_race_seed_{seed}_does_not_reproduce(target):
    for _ in range(TIMES):
        result = reproduce(REPLAY, target)
        assert result.finding is None, result.finding.explanation
'''


def _target_words(doc: Mapping[str, Any]) -> str:
    """How the exported test reaches a URL target, in words (``replay_target`` does it)."""
    target = doc["target"]
    plan = Plan.from_json(doc["plan"])
    rate = doc.get("reproduction")
    lines = [
        f"The race was found over a URL ({target.get('url')}). The test sends the recorded requests again, up to",
        f"{URL_TIMES} times, each time with fresh ids in the target's project; the network interleaves them, so",
        "a race may need several runs" + (f" (the shrunk case reproduced {rate['reproduced']}/{rate['runs']})."
                                          if rate else "."),
        "The target: the target file AIDEMEMO_SIM_CONFIG names, provisioned afresh by its command",
    ]
    if target.get("config"):
        lines.append(f"(default: {target['config']}, the file the run used); run it where you ran aidememo-sim,")
        lines.append("since the file's provisioning command runs in the current directory.")
    else:
        variables = ", ".join(token_variable(a) for a in plan.identities)
        lines.append(f"or else BASE_URL (default {target.get('url')}), PROJECT (default {target.get('project')})")
        lines.append(f"and the tokens {variables}.")
    return "\n" + "\n".join(lines) + "\n"


def pytest_text(doc: Mapping[str, Any], name: str) -> str:
    """A standalone pytest file that fails while the recorded race reproduces."""
    slim = {k: doc[k] for k in ("format", "seed", "target", "plan", "schedule")}
    over_url = doc["target"].get("kind") == "url"
    return _PYTEST_TEMPLATE.format(seed=doc["seed"], name=name, doc=json.dumps(slim, sort_keys=True),
                                   times=URL_TIMES if over_url else 1, where=_target_words(doc) if over_url else "")


def _plain(value: object) -> str | None:
    """``value`` when it can stand inside a double-quoted shell default as it is, else None."""
    return value if isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9._:/@%+=-]+", value) else None


def _word(text: str) -> str:
    """``text`` as one shell word, with @RUN@ and @PROJECT@ spliced in as "$RUN" and "$PROJECT"."""
    parts = _SPLICE.split(text)
    word = "".join('"$RUN"' if p == _RUN else '"$PROJECT"' if p == _PROJECT else shlex.quote(p) if p else ""
                   for p in parts)
    return word or "''"


_PRELUDE = r'''set -u
OUT=$(mktemp -d) || exit 2
trap 'rm -rf "$OUT"' EXIT

send() {  # label, blamed answers ("status code revision" lines), token, method, path[, body]
  if [ $# -ge 6 ]; then
    answer=$(printf 'header = "authorization: Bearer %s"\n' "$3" | curl -sS -K - -X "$4" "$BASE_URL$5" \
      -H 'content-type: application/json' --data "$6" -w ' [HTTP %{http_code}]' 2>&1)
  else
    answer=$(printf 'header = "authorization: Bearer %s"\n' "$3" | curl -sS -K - -X "$4" "$BASE_URL$5" \
      -w ' [HTTP %{http_code}]' 2>&1)
  fi
  verdict=""
  if [ -n "$2" ]; then
    ok=0
    while read -r status code revision; do
      if allowed "$answer" "$status" "$code" "$revision"; then ok=1; fi
    done <<EOF
$2
EOF
    if [ "$ok" = 1 ]; then
      verdict="  -> one of the answers the model allowed
"
    else
      verdict="  -> none of the answers the model allowed: the race reproduced
"
      : > "$OUT/reproduced"
    fi
  fi
  printf '%s\n  answered: %s\n%s' "$1" "$answer" "$verdict"
}

advance() {  # milliseconds, token: move the server's test clock (the /__test__/clock extension)
  answer=$(printf 'header = "authorization: Bearer %s"\n' "$2" | curl -sS -K - -X POST "$BASE_URL/__test__/clock" \
    -H 'content-type: application/json' --data "{\"advance_ms\": $1}" -w ' [HTTP %{http_code}]' 2>&1)
  printf 'clock moved %s ms forward\n  answered: %s\n' "$1" "$answer"
}

allowed() {  # answer, status, code ("-": none), revision ("-": any)
  case "$1" in *"[HTTP $2]") ;; *) return 1 ;; esac
  if [ "$3" != - ] && ! printf '%s' "$1" | grep -Eq "\"code\" *: *\"$3\""; then return 1; fi
  if [ "$4" != - ] && ! printf '%s' "$1" | grep -Eq "\"revision\" *: *$4([^0-9]|\$)"; then return 1; fi
  return 0
}
'''


def _provisioning(template: str, actors: Sequence[str]) -> list[str]:
    """Shell lines that provision a fresh project with the target file's command when PROJECT is
    unset: the same argv the suite's provisioner runs (split once, no shell), a fresh 0600 token
    file per actor, the file's contents afterwards as the token."""
    marks = {"tenant": SIM_TENANT, "project": "\0project\0", "actor": "\0actor\0", "role": "\0role\0",
             "token_file": "\0file\0"}
    spliced = {"\0project\0": '"$PROJECT"', "\0actor\0": '"$1"', "\0role\0": '"$2"', "\0file\0": '"$tf"'}
    try:
        argv = [part.format(**marks) for part in shlex.split(template)]
    except (KeyError, IndexError, ValueError):
        return []  # a template the run could not have used either; PROJECT and the tokens must be given

    def word(part: str) -> str:
        pieces = re.split("(\0[a-z_]+\0)", part)
        return "".join(spliced.get(p) or (shlex.quote(p) if p else "") for p in pieces) or "''"

    lines = [
        'if [ -z "${PROJECT:-}" ]; then',
        '  PROJECT="sim-$RUN"',
        "  provision() {  # actor, role: the actor's token on standard output, never on the terminal",
        '    tf=$(mktemp) || exit 2',
        "    od -An -N16 -tx1 /dev/urandom | tr -d ' \\n' > \"$tf\"",
        f"    if ! {' '.join(word(p) for p in argv)} >/dev/null 2>&1; then",
        '      rm -f "$tf"; echo "provisioning $1 with the target file\'s command failed" >&2; exit 2',
        "    fi",
        '    cat "$tf"; rm -f "$tf"',
        "  }",
    ]
    for actor in actors:
        role = "reader" if actor == READER else "writer"
        lines.append(f"  {token_variable(actor)}=$(provision {shlex.quote(actor)} {role}) || exit 2")
    lines.append("fi")
    return lines


def _blamed(doc: Mapping[str, Any]) -> dict[int, tuple[str, ...]]:
    """History index of each operation the checker blamed -> the answers the model allowed it."""
    finding = doc.get("finding") or {}
    return {int(index): tuple(answers) for index, answers in finding.get("expected", [])}


def _identity(op_input: Mapping[str, Any]) -> str:
    # Without the time: a rerun over a URL tells the model the server's time, not the plan's.
    # What the runner stamps on a recorded request (its clock readings) is not part of the request.
    stamped = ("request", "now_ms", "now_max_ms", "clock")
    return json.dumps({k: v for k, v in op_input.items() if k not in stamped}, sort_keys=True,
                      default=str)


def _describe(op: PlannedOp) -> str:
    return LEDGER.describe_operation(op.input, None).removesuffix(" -> unknown")


def _recorded(doc: Mapping[str, Any]) -> dict[tuple[int, str], tuple[int, str | None]]:
    """(worker, request) -> its index in the recorded history and the answer it had there (a
    request sent twice alike by one worker is named by its first)."""
    out: dict[tuple[int, str], tuple[int, str | None]] = {}
    for index, raw in enumerate(doc.get("history", [])):
        answer = None if raw.get("output") is None else describe_answer(raw["output"])
        out.setdefault((int(raw["client"]), _identity(raw["input"])), (index, answer))
    return out


def _send_line(label: str, allowed: Sequence[str], actor: str, op: PlannedOp, recorded: str | None,
               run_id: str) -> str:
    parts = [answer_parts(one) for a in allowed for one in a.split(" or ")]  # a clock window allows either
    lines = "\n".join(f"{s} {c or '-'} {'-' if r is None else r}" for s, c, r in (p for p in parts if p))
    shown = label + (f" (recorded: {recorded})" if recorded else "")
    if allowed:
        shown += f"; the model allowed: {' or '.join(allowed)}"
    shown = marked_run(shown, run_id)  # the ids in answers too are this run's
    words = ["send", _word(shown), shlex.quote(lines) if lines else "''", f'"${token_variable(actor)}"', op.method,
             _word(op.path)]
    if op.body is not None:
        words.append(_word(json.dumps(op.body, sort_keys=True)))
    return " ".join(words)


def curl_text(doc: Mapping[str, Any], template: str | None) -> str:
    """The curl script: the setup and every batch, with fresh ids in the project it provisions (or
    is given); ``template`` is the target file's provisioning command, if there is one."""
    recorded_plan = Plan.from_json(doc["plan"])
    placed = recorded_plan.rebased(_RUN, _PROJECT)
    actors = recorded_plan.identities
    target = doc["target"]
    url = _plain(target.get("url"))
    project = None if template else _plain(target.get("project"))
    found = f"over {url}" if target.get("kind") == "url" else "on the embedded reference"
    variables = " ".join(token_variable(a) for a in actors)
    lines = [
        "#!/bin/sh",
        f"# Exported by aidememo-sim (seed {doc['seed']}) from a race found {found}: the same requests, batch by",
        "# batch, each batch launched at once in the background, with fresh ids every run. Each answer is",
        "# printed beside the one recorded; for the operations the checker blamed, also the answers the model",
        "# allowed in the recorded run, and the script exits 1 when one is none of them. Curl cannot force an",
        "# interleaving: over a network a race may need several runs, and a correct server may order a batch",
        "# otherwise than the recorded run did; aidememo-sim replay judges with the model.",
        f"# Set BASE_URL{'' if url is None else f' (default {url})'}, PROJECT"
        + ("" if project is None else f" (default {project})")
        + f" and {variables}" + ("," if template else "."),
    ]
    if template:
        lines += ["# or leave PROJECT unset: a fresh project and fresh tokens are provisioned with the command of the",
                  "# target file the run used, run in the current directory as aidememo-sim runs it."]
    lines += ["# Tokens are never printed.", _PRELUDE.rstrip("\n")]
    lines.append(f'BASE_URL="${{BASE_URL:-{url}}}"' if url else ': "${BASE_URL:?set BASE_URL to the server URL}"')
    lines.append('RUN="${RUN:-x$(date +%s)$$}"  # inside every id: a fresh RUN gives fresh ids')
    if template:
        lines += _provisioning(template, actors)
    elif project is not None:
        lines.append(f'PROJECT="${{PROJECT:-{project}}}"  # the project the run was given')
    lines.append(': "${PROJECT:?set PROJECT (and the tokens)}"')
    lines += [f': "${{{token_variable(a)}:?set {token_variable(a)}}}"' for a in actors]
    lines.append("echo '# setup: one session, one fact per actor'")
    for actor, path, body, what in setup_requests(_PROJECT, recorded_plan.actors, _RUN):
        lines.append(f"send {_word(actor + ' ' + what)} '' \"${token_variable(actor)}\" POST {_word(path)} "
                     f"{_word(json.dumps(body, sort_keys=True))}")
    blamed = _blamed(doc)
    recorded = _recorded(doc)
    previous: int | None = None
    for n, (batch, original) in enumerate(zip(placed.batches, recorded_plan.batches)):
        lines.append(f"echo '# batch {n}'")
        if batch.clock_ms is not None:
            # As a replay does: each batch keeps its step from the one before on the server's clock.
            step = 0 if previous is None else batch.clock_ms - previous
            previous = batch.clock_ms
            if step > 0:
                lines.append(f'advance {step} "${token_variable(recorded_plan.actors[0])}"')
        for op, then in zip(batch.ops, original.ops):
            index, answer = recorded.get((then.worker, _identity(then.input)), (None, None))
            label = ("#?" if index is None else f"#{index}") + " " + _describe(op)
            lines.append(_send_line(label, blamed.get(index, ()) if index is not None else (), op.actor, op,
                                    answer, recorded_plan.run_id) + " &")
        lines.append("wait")
    lines.append('if [ -e "$OUT/reproduced" ]; then echo "an answer the checker blamed reproduced"; exit 1; fi')
    lines.append('echo "every blamed answer was one the model allowed"')
    return "\n".join(lines) + "\n"
