"""The script side of a reproduction: fills a group's requests into files and judges their answers.

A reproduction script (``conformance.reproduction.script``) carries this module's source and
``record``'s, joined into one file, and runs it with ``python3`` between its ``curl`` calls:

    python3 engine.py RECORD WORK render N   # group N's requests into WORK/stepK.{url,headers,body}
                                             # (a command step's into WORK/stepK.{args,env,body})
    python3 engine.py RECORD WORK judge N    # group N's answers (WORK/stepK.{status,head,out}) judged
                                             # (a command's WORK/stepK.{exit,out,err})
    python3 engine.py RECORD WORK next N     # judge N-1, then render N (one interpreter start per group)
    python3 engine.py RECORD WORK cleanup 0  # the cleanup steps a run that stopped early did not send

``render`` prints what each step sends and expects; ``judge`` prints each answer with every
credential of WORK/token.* hidden, and exits with the ``Verdict`` value of the group: 0 it
holds, 1 the bug shows, 2 it could not be judged (no answer, a template without its value).
Standard library only, since the script runs it without the kit; it must not import the kit.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from conformance.reproduction.record import COMMAND, RESTART
from conformance.reproduction.record import Answered, Reproduction, Scope, Step, Unbound, Verdict, judge_group, load_record

__all__ = ["main"]

_SHOWN_BYTES = 4000  # of one answer's body on the terminal; the whole body stays in WORK until exit


def _tokens(work: Path) -> dict[str, str]:
    return {path.name.removeprefix("token."): path.read_text("utf-8").strip() for path in work.glob("token.*")}


def _ran(work: Path, name: str) -> Answered:
    text = (work / f"{name}.exit").read_text("utf-8", "replace").strip()
    stderr = (work / f"{name}.err").read_bytes().decode("utf-8", "replace") if (work / f"{name}.err").exists() else ""
    body = (work / f"{name}.out").read_bytes() if (work / f"{name}.out").exists() else b""
    return Answered(exit=int(text) if text.isdigit() else None, body=body, error=stderr.strip())


def _answered(work: Path, name: str) -> Answered | None:
    if (work / f"{name}.exit").exists():
        return _ran(work, name)
    status_file = work / f"{name}.status"
    if not status_file.exists():
        return None
    status_text = status_file.read_text("utf-8", "replace").strip()
    status = int(status_text) if status_text.isdigit() else 0
    head = (work / f"{name}.head").read_bytes().decode("latin-1") if (work / f"{name}.head").exists() else ""
    blocks = [block for block in head.replace("\r\n", "\n").split("\n\n") if block.strip()]
    lines = blocks[-1].splitlines()[1:] if blocks else []  # the last answer's headers (past any 100 Continue)
    headers = tuple((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines))
    error = (work / f"{name}.err").read_text("utf-8", "replace").strip() if (work / f"{name}.err").exists() else ""
    body = (work / f"{name}.out").read_bytes() if (work / f"{name}.out").exists() else b""
    return Answered(status=status, headers=headers, body=body, error=error)


def _scope(record: Reproduction, work: Path) -> Scope:
    answers = {}
    for step in record.steps:
        got = _answered(work, step.name)
        if got is not None:
            answers[step.name] = got
    return Scope(run=(work / "run").read_text("utf-8").strip(), tokens=_tokens(work), answers=answers,
                 dir=str(work / "d"))


def _hidden(text: str, tokens: Mapping[str, str]) -> str:
    for token in sorted(tokens.values(), key=len, reverse=True):
        if len(token) >= 4:
            text = text.replace(token, "<redacted>")
    return text


def _render(record: Reproduction, work: Path, batch: list[Step], base_url: str) -> int:
    scope = _scope(record, work)
    for step in batch:
        if step.method == RESTART:
            print(f"--- {step.name}: the server is killed (kill -9) and started again" + (f" [{step.note}]" if step.note else ""))
            continue
        if step.method == COMMAND:
            if not _command(step, scope, work):
                return Verdict.CANNOT_RUN
            continue
        try:
            target, headers, body = step.request(scope)
        except Unbound as exc:
            print(f"cannot send {step.name}: {exc}")
            return Verdict.CANNOT_RUN
        (work / f"{step.name}.url").write_text(base_url.rstrip("/") + target, "utf-8")
        (work / f"{step.name}.headers").write_text("".join(f"{k}: {v}\n" for k, v in headers), "utf-8")
        if body is not None:
            (work / f"{step.name}.body").write_bytes(body)
        together = " (sent at once with its group)" if len(batch) > 1 else ""
        print(_hidden(f"--- {step.name}: {step.method} {target}{together}"
                      + (f" [{step.note}]" if step.note else "") + f"; expected: {step.expected()}", scope.tokens))
    return Verdict.NOT_SHOWN


def _cleanup(record: Reproduction, work: Path, base_url: str) -> int:
    """Render the cleanup steps the run stopped before (no answer yet), to be sent unjudged."""
    scope = _scope(record, work)
    for step in record.steps:
        if not step.cleanup or step.method in (COMMAND, RESTART) or (work / f"{step.name}.status").exists():
            continue
        try:
            target, headers, body = step.request(scope)
        except Unbound:
            continue
        (work / f"{step.name}.url").write_text(base_url.rstrip("/") + target, "utf-8")
        (work / f"{step.name}.headers").write_text("".join(f"{k}: {v}\n" for k, v in headers), "utf-8")
        if body is not None:
            (work / f"{step.name}.body").write_bytes(body)
        print(_hidden(f"--- {step.name}: {step.method} {target} (sent though the run stopped before it: it leaves "
                      f"the target as the check did; not judged)", scope.tokens))
    return Verdict.NOT_SHOWN


def _command(step: Step, scope: Scope, work: Path) -> bool:
    """A command step's words and variables as shell words for the script's ``eval`` (quoted here, so
    no value is ever read as shell syntax), its stdin as a file; False: a template lacks its value."""
    try:
        words, env, stdin = step.command(scope)
    except Unbound as exc:
        print(f"cannot run {step.name}: {exc}")
        return False
    (work / f"{step.name}.args").write_text(" ".join(shlex.quote(w) for w in words), "utf-8")
    (work / f"{step.name}.env").write_text(" ".join(shlex.quote(f"{k}={v}") for k, v in env), "utf-8")
    (work / f"{step.name}.body").write_bytes(stdin)
    shown = " ".join(shlex.quote(w) for w in words).replace(scope.dir, "$DIR")
    print(_hidden(f"--- {step.name}: $CLI {shown}" + (f" [{step.note}]" if step.note else "")
                  + f"; expected: {step.expected()}", scope.tokens))
    return True


def _judge(record: Reproduction, work: Path, batch: list[Step]) -> int:
    scope = _scope(record, work)
    answers = []
    batch = [step for step in batch if step.method != RESTART]  # no request, no answer
    if not batch:
        return Verdict.NOT_SHOWN
    for step in batch:
        got = scope.answers.get(step.name)
        if got is None or not got.came:
            print(_hidden(f"{step.name}: no answer ({(got.error if got else '') or 'curl gave none'})", scope.tokens))
            return Verdict.CANNOT_RUN
        body = got.body[:_SHOWN_BYTES].decode("utf-8", "replace")
        more = f"... ({len(got.body)} bytes)" if len(got.body) > _SHOWN_BYTES else ""
        said = f" (stderr: {got.error[:_SHOWN_BYTES]})" if got.exit is not None and got.error else ""
        print(_hidden(f"{step.name} answered {got.describe()}: {body}{more}{said}", scope.tokens))
        answers.append(got)
    why = judge_group(batch, answers, scope)
    if why is None:
        return Verdict.NOT_SHOWN
    print(_hidden(f"THE BUG SHOWS: {why}", scope.tokens))
    return Verdict.SHOWN


def main(argv: list[str] | None = None) -> int:
    """``engine.py RECORD WORK (render|judge|next|cleanup|hide) GROUP [BASE_URL]``; the exit status as above."""
    args = sys.argv[1:] if argv is None else argv
    try:
        record = load_record(Path(args[0]).read_text("utf-8"))
        work, verb, group = Path(args[1]), args[2], int(args[3])
        batch = record.groups()[group]
    except (IndexError, ValueError, OSError) as exc:
        print(f"the reproduction engine cannot start: {exc}")
        return Verdict.CANNOT_RUN
    try:
        if verb == "render":
            return _render(record, work, batch, args[4] if len(args) > 4 else "")
        if verb == "next":  # judge the group before, then render this one: one interpreter start per group
            judged = _judge(record, work, record.groups()[group - 1])
            return judged if judged != Verdict.NOT_SHOWN else _render(record, work, batch,
                                                                      args[4] if len(args) > 4 else "")
        if verb == "cleanup":
            return _cleanup(record, work, args[4] if len(args) > 4 else "")
        if verb == "hide":  # a command's output (provisioning), credentials hidden
            sys.stdout.write(_hidden(sys.stdin.read(), _tokens(work)))
            return Verdict.NOT_SHOWN
        return _judge(record, work, batch)
    except Exception as exc:  # the engine's own failure: Python's exit 1 would read as "the bug shows"
        print(f"cannot run: the reproduction engine failed ({type(exc).__name__}: {exc})")
        return Verdict.CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main())
