"""The one replay runner: a reproduction record sent again from Python, judged as its script judges.

``replay`` provisions the record's identities in a fresh namespace with the templates its caller
hands it, from the target file the caller names (a record's own template is data: shown in its
script, compared, never run), or reads the token files a user names; it sends each group's requests (a group's from threads
behind one barrier), fills templates from earlier answers and judges each answer with
``record``'s code: the same record, the same verdict and exit status as its shell script.
``aidememo-conformance reproduce [--config TARGET] RECORD.json`` runs it. A command step runs the target's command
line (``CLI``, which the caller names: a record's own is never run) in a directory made anew for each try.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx

from conformance.reproduction.record import (
    COMMAND,
    Answered,
    Reproduction,
    Scope,
    Step,
    Unbound,
    Verdict,
    identity_argv,
    judge_group,
)

__all__ = ["Execute", "Outcome", "Send", "Templates", "command_runner", "http_sender", "replay", "send_steps"]

Send = Callable[[str, str, Sequence[tuple[str, str]], bytes | None], Answered]  # method, url, headers, body
Execute = Callable[[Sequence[str], Sequence[tuple[str, str]], bytes, str], Answered]  # words, env, stdin, directory
_PROVISION_TIMEOUT_S = 60
_TIMEOUT_S = 10.0  # one request's answer: the suite's default --timeout
_COMMAND_TIMEOUT_S = 60.0  # one command's exit: a CLI starts an interpreter, and may wait on its store's lock


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a replay found: the verdict (its value is the exit status) and why, in one line."""

    verdict: Verdict
    why: str
    tries: int = 1


def http_sender(client: httpx.Client) -> Send:
    """A ``Send`` over ``client``; a transport failure answers status 0 (``error`` says why)."""

    def send(method: str, url: str, headers: Sequence[tuple[str, str]], body: bytes | None) -> Answered:
        try:
            response = client.request(method, url, headers=list(headers), content=body)
        except httpx.HTTPError as exc:
            return Answered(status=0, error=f"{type(exc).__name__}: {exc or 'no detail'}")
        return Answered(status=response.status_code, headers=tuple(response.headers.items()), body=response.content)

    return send


def command_runner(cli: Sequence[str], timeout_s: float = _COMMAND_TIMEOUT_S,
                   environ: Mapping[str, str] | None = None) -> Execute:
    """An ``Execute`` running ``cli`` followed by a step's words, in ``environ`` (default: this
    process's) with the step's variables; exit None when it could not run or finish."""
    base = dict(os.environ if environ is None else environ)

    def execute(words: Sequence[str], env: Sequence[tuple[str, str]], stdin: bytes, directory: str) -> Answered:
        try:
            done = subprocess.run([*cli, *words], input=stdin, capture_output=True, cwd=directory, check=False,
                                  env={**base, **dict(env)}, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Answered(error=f"the command did not finish: {exc}")
        return Answered(exit=done.returncode if done.returncode >= 0 else None, body=done.stdout,
                        error=done.stderr.decode("utf-8", "replace").strip())

    return execute


Templates = Sequence[tuple[str, str]]  # (identity field that must be set, or "", template), first fit wins


def _template(templates: Templates, values: Mapping[str, str]) -> str | None:
    return next((t for key, t in templates if not key or key in values), None) or None


def _provision(repro: Reproduction, run: str, workdir: Path, environ: Mapping[str, str],
               templates: Templates) -> dict[str, str] | str:
    """Each identity's token (by label), or why one could not be made."""
    tokens: dict[str, str] = {}
    for who in repro.identities:
        values = who.filled(run)
        token_file = workdir / f"token.{who.label}"
        template = _template(templates, values)
        argv = identity_argv(template, values, str(token_file), shlex.split) if template and not who.given else None
        if argv is None:
            name = "".join(c if c.isalnum() else "_" for c in who.label).upper()
            variable = f"TOKEN_FILE_{name}"
            given = environ.get(variable)
            if not given and environ.get(f"TOKEN_{name}"):  # the token itself, as the simulator's commands take it
                tokens[who.label] = environ[f"TOKEN_{name}"]
                continue
            if not given:
                return f"set {variable} to a file holding the token of {who.label} ({values}), or TOKEN_{name} to it"
            try:
                tokens[who.label] = Path(given).read_text("utf-8").strip()
            except OSError as exc:
                return f"cannot read {variable} ({given}): {exc.strerror}"
            continue
        token = f"{repro.target.credential_prefix}{secrets.token_hex(16)}"
        descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # 0600 from the start: templates refuse more
            handle.write(token + "\n")
        try:
            done = subprocess.run(argv, capture_output=True, text=True,  # here, as the suite ran it
                                  timeout=_PROVISION_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"provisioning {who.label} with the target's template failed: {exc}"
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"provisioning {who.label} with the target's template exited {done.returncode}: {last[0]}"
        tokens[who.label] = token_file.read_text("utf-8").strip()
    return tokens


def _send_group(batch: list[Step], scope: Scope, base_url: str, send: Send,
                execute: Execute | None) -> list[Answered] | str:
    """Every step of a batch sent, a group's lanes at once behind a barrier; or why one could not be filled in."""
    requests: list[Callable[[], Answered]] = []
    for step in batch:
        try:
            if step.method == COMMAND:
                if execute is None:
                    return f"cannot run {step.name}: no command line to run it with (set CLI)"
                words, env, stdin = step.command(scope)
                requests.append(partial(execute, words, env, stdin, scope.dir))
                continue
            target, headers, body = step.request(scope)
        except Unbound as exc:
            return f"cannot send {step.name}: {exc}"
        requests.append(partial(send, step.method, base_url.rstrip("/") + target, headers, body))
    if len(requests) == 1:
        return [requests[0]()]
    answers: list[Answered] = [Answered(status=0, error="not sent")] * len(requests)
    at = {id(step): index for index, step in enumerate(batch)}
    lanes = [[at[id(step)] for step in lane] for lane in Reproduction.lanes(batch)]
    barrier = threading.Barrier(len(lanes))

    def one(lane: list[int]) -> None:
        barrier.wait()
        for index in lane:  # a lane's steps one after another
            answers[index] = requests[index]()

    threads = [threading.Thread(target=one, args=(lane,)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def send_steps(repro: Reproduction, *, base_url: str, send: Send, tokens: Mapping[str, str],
               run: str, execute: Execute | None = None, directory: str = "") -> tuple[Outcome, dict[str, Answered]]:
    """One pass over the steps with identities already made; the outcome and the answers so far
    (``execute`` runs command steps in ``directory``). A pass that stops early still sends the
    cleanup steps it did not reach, unjudged (a held test clock's release)."""
    answers: dict[str, Answered] = {}
    outcome = _pass(repro, base_url, send, tokens, run, execute, directory, answers)
    if outcome.verdict is not Verdict.NOT_SHOWN:
        for step in repro.steps:
            if step.cleanup and step.method != COMMAND and step.name not in answers:
                try:
                    target, headers, body = step.request(Scope(run=run, tokens=tokens, answers=answers, dir=directory))
                except Unbound:
                    continue
                send(step.method, base_url.rstrip("/") + target, headers, body)
    return outcome, answers


def _pass(repro: Reproduction, base_url: str, send: Send, tokens: Mapping[str, str], run: str,
          execute: Execute | None, directory: str, answers: dict[str, Answered]) -> Outcome:
    for batch in repro.groups():
        got = _send_group(batch, Scope(run=run, tokens=tokens, answers=answers, dir=directory), base_url, send,
                          execute)
        if isinstance(got, str):
            return Outcome(verdict=Verdict.CANNOT_RUN, why=got)
        for step, answer in zip(batch, got):
            answers[step.name] = answer
        missing = next((step for step, answer in zip(batch, got) if not answer.came), None)
        if missing is not None:
            return Outcome(verdict=Verdict.CANNOT_RUN, why=f"{missing.name}: no answer ({answers[missing.name].error})")
        why = judge_group(batch, got, Scope(run=run, tokens=tokens, answers=answers, dir=directory))
        if why is not None:
            return Outcome(verdict=Verdict.SHOWN, why=why)
    return Outcome(verdict=Verdict.NOT_SHOWN, why="every answer is what a correct server answers")


def _once(repro: Reproduction, base_url: str, send: Send, environ: Mapping[str, str], run: str,
          execute: Execute | None, templates: Templates) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="aidememo-reproduce-") as work:
        os.chmod(work, 0o700)
        tokens = _provision(repro, run, Path(work), environ, templates)
        if isinstance(tokens, str):
            return Outcome(verdict=Verdict.CANNOT_RUN, why=tokens)
        directory = Path(work) / "d"
        directory.mkdir()
        return send_steps(repro, base_url=base_url, send=send, tokens=tokens, run=run, execute=execute,
                          directory=str(directory))[0]


def replay(repro: Reproduction, *, base_url: str | None = None, send: Send | None = None,
           environ: Mapping[str, str] | None = None, tries: int | None = None, templates: Templates = ()) -> Outcome:
    """Run ``repro`` up to ``tries`` times (default: the record's), a fresh namespace each; the first
    run that shows the bug, or cannot run, ends it. ``templates`` make its identities (the caller's
    target's; without one that fits, an identity's token is read from ``TOKEN_FILE_<LABEL>``)."""
    env = os.environ if environ is None else environ
    if repro.cannot_run:
        return Outcome(verdict=Verdict.CANNOT_RUN, why=repro.cannot_run)
    if repro.restarts:
        return Outcome(verdict=Verdict.CANNOT_RUN, why="the record kills and restarts the server: run its script with "
                                                       "SERVER_PID_FILE and RESTART_COMMAND")
    url = base_url or env.get("BASE_URL") or repro.target.url or ""
    if not url and any(step.method != COMMAND for step in repro.steps):
        return Outcome(verdict=Verdict.CANNOT_RUN, why="no target: give BASE_URL (the run's target is gone)")
    # The record's own command line is data: it is run only when the caller names it (CLI, --cli).
    cli = env.get("CLI")
    if repro.runs_commands and not cli:
        named = f" (the run's was {repro.target.cli})" if repro.target.cli else ""
        return Outcome(verdict=Verdict.CANNOT_RUN,
                       why=f"no command line: name the target's with --cli or CLI{named}; a record's is never run")
    execute = command_runner(shlex.split(cli), environ=env) if cli else None
    count = tries or repro.tries
    # No redirects (a step's answer is judged as it came) and no proxies from the environment.
    with httpx.Client(timeout=_TIMEOUT_S, follow_redirects=False, trust_env=False) as client:
        sender = send or http_sender(client)
        for attempt in range(1, count + 1):
            outcome = _once(repro, url, sender, env, env.get("RUN") or f"r{secrets.token_hex(4)}", execute, templates)
            if outcome.verdict is not Verdict.NOT_SHOWN:
                return Outcome(verdict=outcome.verdict, why=outcome.why, tries=attempt)
    if repro.race:
        return Outcome(verdict=Verdict.NOT_MET, tries=count,
                       why=f"the race did not show in {count} tries; it cannot be forced, so this is no proof")
    return Outcome(verdict=Verdict.NOT_SHOWN, why="every answer is what a correct server answers", tries=count)
