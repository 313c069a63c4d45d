"""``handoff run``: hand the run to upstream's ``aidememo-worker-lane``, or run it here.

Delegation is upstream's (``run_handoff_worker``): the runner is ``$AIDEMEMO_WORKER_LANE_BIN``,
else ``aidememo-worker-lane`` on ``PATH``; it gets upstream's argument list and the full
environment plus ``AIDEMEMO_BIN`` naming this CLI, so the SDK it runs talks to this store through
``aidememo-ref mcp``; its stdout (the ``WorkerLaneResult`` JSON) is printed as it came, and a
non-zero exit is reported as upstream reports it.

When no runner is installed (or the profile is this kit's ``command`` adapter, which the worker
lane does not know), the built-in runner does the same steps itself: accept with a
``worker-<hex>`` claim, run the agent with heartbeats, record a ``note`` (or ``error``) fact by
the alias in the session, and return it. It prints the same result shape and says on stderr
that it ran.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from refkit.records import distinct
from . import _assignments as assignments
from . import _memory as memory
from . import _rules as rules
from . import _run
from ._errors import LocalError, LocalErrorCode, invalid_input
from ._ids import new_worker_claim
from ._records import AgentProfile, AgentType, Assignment, FactType, Outcome, Status
from ._store import LocalStore

__all__ = ["RunRequest", "RunContext", "run", "runner_argv", "self_command"]

RUNNER = "aidememo-worker-lane"


class RunContext(Protocol):
    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def now_ms(self) -> int: ...

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def out(self) -> Callable[[str], None]: ...

    @property
    def err(self) -> Callable[[str], None]: ...


@distinct
class RunRequest(NamedTuple):
    alias: str
    handoff_id: str | None
    next: bool
    workspace: str | None
    kanban_task: str | None
    timeout_s: int | None
    heartbeat_interval_s: int | None
    store_path: str
    backend: str


def _profile(store_path: str, alias: str) -> AgentProfile:
    store = LocalStore(store_path)
    try:
        with store.transaction(write=False):
            profile = store.get_agent(alias)
    finally:
        store.close()
    if profile is None:
        raise invalid_input(f'installation "{alias}" not found; add it with `aidememo installation add`')
    return profile


def self_command() -> str:
    """An executable that runs this CLI, for ``AIDEMEMO_BIN`` (the SDK runs it as one word)."""
    for candidate in (sys.argv[0] if os.path.basename(sys.argv[0]).startswith(("aidememo", "aidememo-ref")) else "",
                      os.path.join(os.path.dirname(sys.executable), "aidememo-ref"),
                      shutil.which("aidememo-ref") or ""):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise LocalError(LocalErrorCode.INTERNAL, "cannot find the aidememo-ref executable to pass as AIDEMEMO_BIN")


def runner_argv(runner: str, request: RunRequest, profile: AgentProfile, workspace: str) -> list[str]:
    """Upstream's argument list for the worker lane, in its order."""
    argv = [runner, "--next"] if request.next or request.handoff_id is None else [runner, request.handoff_id]
    argv += ["--actor-id", request.alias, "--agent", str(profile.agent), "--workspace", workspace,
             "--store", request.store_path, "--backend", request.backend, "--env-policy", str(profile.env_policy)]
    for flag, value in (("--binary", profile.binary), ("--config-home", profile.config_home),
                        ("--source-id", profile.source_id), ("--model", profile.model)):
        if value is not None:
            argv += [flag, value]
    for name in profile.pass_env:
        argv += ["--pass-env", name]
    for flag, number in (("--kanban-task", request.kanban_task), ("--timeout", request.timeout_s),
                         ("--heartbeat-interval", request.heartbeat_interval_s)):
        if number is not None:
            argv += [flag, str(number)]
    return argv


def _exit_status(code: int) -> str:
    """How Rust's ``ExitStatus`` prints, which upstream's error line embeds."""
    if code >= 0:
        return f"exit status: {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"signal: {-code}"
    return f"signal: {-code} ({name})"


def run(request: RunRequest, ctx: RunContext) -> int:
    if request.next and request.handoff_id is not None:
        raise invalid_input("pass HANDOFF_ID or --next, not both")
    profile = _profile(request.store_path, request.alias)
    if profile.agent is AgentType.MANUAL:
        raise invalid_input(
            f'agent "{request.alias}" uses the manual adapter; read/accept/heartbeat/return it through CLI, MCP,'
            " or the Python SDK"
        )
    workspace = request.workspace or profile.workspace or os.getcwd()
    if not os.path.isdir(workspace):
        raise invalid_input(f"worker workspace is not a directory: {workspace}")
    explicit = (ctx.env.get("AIDEMEMO_WORKER_LANE_BIN") or "").strip()
    runner = explicit or shutil.which(RUNNER, path=ctx.env.get("PATH"))
    if runner and profile.agent is not AgentType.COMMAND:
        return _delegate(runner, request, profile, workspace, ctx)
    code = _builtin(request, profile, workspace, ctx)
    # Said after the result, so a refusal stays one line (a failed result names its runner too).
    reason = "the command adapter is this kit's own" if runner else f"{RUNNER} is not installed"
    ctx.err(f"note: {reason}; ran aidememo-ref's built-in runner")
    return code


def _delegate(runner: str, request: RunRequest, profile: AgentProfile, workspace: str, ctx: RunContext) -> int:
    env = dict(ctx.env)
    env["AIDEMEMO_BIN"] = self_command()
    argv = runner_argv(runner, request, profile, workspace)
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        raise LocalError(LocalErrorCode.INTERNAL, f"could not start {json.dumps(runner)}: {exc};"
                         " install packages/aidememo-agent-sdk or set AIDEMEMO_WORKER_LANE_BIN") from exc
    stdout, stderr = done.stdout.strip(), done.stderr.strip()
    if done.returncode != 0:
        raise LocalError(LocalErrorCode.INTERNAL, f"external handoff worker failed"
                         f" (status {_exit_status(done.returncode)}): {stderr or stdout}")
    if not stdout:
        raise LocalError(LocalErrorCode.INTERNAL, "external handoff worker returned no result")
    ctx.out(stdout)
    return 0


def _bounded(text: str, limit: int) -> str:
    """The worker lane's truncation: at most ``limit`` characters and a marker."""
    clean = text.strip()
    if len(clean) <= limit:
        return clean
    return f"{clean[:limit].rstrip()}\n...[truncated {len(clean) - limit} chars]"


def _next_pending(store: LocalStore, alias: str, source_id: str | None) -> str:
    pending = [r for r in store.mailbox(column="to_actor", actor=alias, source_id=source_id,
                                        include_completed=False, limit=None) if r.status is Status.PENDING]
    if not pending:
        where = f" in source {source_id!r}" if source_id else ""
        raise invalid_input(f"no pending handoff for actor {alias!r}{where}")
    return min(pending, key=lambda r: r.created_at).handoff_id


def _builtin(request: RunRequest, profile: AgentProfile, workspace: str, ctx: RunContext) -> int:
    timeout_s = request.timeout_s or int(rules.DEFAULT_RUN_TIMEOUT_S)
    interval_s = request.heartbeat_interval_s or int(rules.DEFAULT_HEARTBEAT_INTERVAL_S)
    # Fail before accepting: a run that cannot start must not claim the assignment.
    _run.build_invocation(profile, prompt="", handoff_env={}, workspace=workspace, environ=ctx.env)
    claim = new_worker_claim()
    store = LocalStore(request.store_path)
    try:
        with store.transaction(write=True):
            handoff_id = request.handoff_id or _next_pending(store, request.alias, profile.source_id)
            accepted = assignments.accept(store, handoff_id, request.alias, claim, ctx.now_ms)
        return _execute(store, request, profile, workspace, accepted, claim, timeout_s, interval_s, ctx)
    finally:
        store.close()


def _execute(store: LocalStore, request: RunRequest, profile: AgentProfile, workspace: str,
             accepted: assignments.Accepted, claim: str, timeout_s: int, interval_s: int, ctx: RunContext) -> int:
    """Run the accepted assignment's worker, record its result, print the report."""
    record = accepted.assignment
    handoff_env, kanban_task = _handoff_env(request, record, claim)
    with tempfile.TemporaryDirectory(prefix="aidememo-ref-run-") as scratch:
        last_message = os.path.join(scratch, "last-message.txt")
        invocation = _run.build_invocation(profile, prompt=_prompt(record, accepted.packet.content),
                                           handoff_env=handoff_env, workspace=workspace, environ=ctx.env,
                                           last_message=last_message)
        result = _run.run_process(invocation, timeout_s=timeout_s, heartbeat_interval_s=interval_s,
                                  heartbeat=_pulse(request.store_path, record, ctx))
        text = result.stdout
        if profile.agent is AgentType.CODEX and os.path.isfile(last_message):
            with open(last_message, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
    agent = str(profile.agent)
    output = _bounded(text, _run.MAX_RESULT_CHARS)
    succeeded = result.exit_code == 0 and bool(output)
    content = _result_content(agent, record, result, output, succeeded)
    recorded = _record_result(store, record, claim, agent, content, succeeded, ctx)
    status = recorded.status
    data: dict[str, Any] = {
        "ok": recorded.succeeded, "status": status, "handoff_id": record.handoff_id, "actor_id": record.to_actor,
        "agent": agent, "session_id": record.session_id, "source_id": record.source_id, "kanban_task": kanban_task,
        "command": list(invocation.argv), "exit_code": result.exit_code, "timed_out": result.timed_out,
        "elapsed_ms": float(result.elapsed_ms), "result": output if status == "completed" else content,
        "result_fact_id": recorded.fact_id if status == "completed" else None,
        "error_fact_id": None if status == "completed" else recorded.fact_id,
        "assignment_status": recorded.assignment_status,
        "error": recorded.error if recorded.error is not None else (
            None if recorded.succeeded else "external worker failed"),
        "structured_result": None, "done_when_met": None, "heartbeat_count": result.heartbeat_count,
        "heartbeat_errors": list(result.heartbeat_errors), "runner": "aidememo-ref built-in",
    }
    text = json.dumps(data, ensure_ascii=False)
    if not recorded.succeeded:
        raise LocalError(LocalErrorCode.INTERNAL,
                         f"external handoff worker failed (status {_exit_status(1)}): {text}")
    ctx.out(text)
    return 0


def _handoff_env(request: RunRequest, record: Assignment, claim: str) -> tuple[dict[str, str], str | None]:
    """The worker's ``AIDEMEMO_*`` variables, and the Hermes kanban task it works for (if any)."""
    env = {"AIDEMEMO_STORE": os.path.abspath(request.store_path), "AIDEMEMO_HANDOFF_ID": record.handoff_id,
           "AIDEMEMO_SESSION_ID": record.session_id, "AIDEMEMO_ACTOR_ID": record.to_actor,
           "AIDEMEMO_CLAIM_ID": claim}
    if record.source_id is not None:
        env["AIDEMEMO_SOURCE_ID"] = record.source_id
    kanban_task = request.kanban_task or (record.upstream_task_id if record.upstream_system == "hermes_kanban"
                                          else None)
    if kanban_task is not None:
        env["HERMES_KANBAN_TASK"] = kanban_task
    return env, kanban_task


def _prompt(record: Assignment, evidence: str) -> str:
    return (f"Focus: {record.focus or 'Complete the assigned coding task.'}\n"
            f"Done when: {record.done_when or 'Return a verifiable result.'}\n\n"
            "--- BEGIN AIDEMEMO EVIDENCE ---\n" + evidence + "--- END AIDEMEMO EVIDENCE ---\n"
            "Return a concise final report on stdout.\n")


def _pulse(store_path: str, record: Assignment, ctx: RunContext) -> Callable[[], None]:
    def beat() -> None:
        # Each pulse runs on the pulse thread with its own connection and transaction: the
        # runner holds no lock meanwhile.
        pulse = LocalStore(store_path)
        try:
            with pulse.transaction(write=True):
                assignments.heartbeat(pulse, record.handoff_id, record.to_actor, ctx.clock())
        finally:
            pulse.close()

    return beat


def _result_content(agent: str, record: Assignment, result: _run.ProcessResult, output: str, succeeded: bool) -> str:
    """The fact recording the run: the worker's output, or what went wrong."""
    if succeeded:
        return f"External worker result ({agent}, handoff {record.handoff_id}):\n{output}"
    detail = _bounded("\n".join(p for p in (result.stderr.strip(), result.stdout.strip()) if p)
                      or ("external worker timed out" if result.timed_out else "external worker returned no result"),
                      _run.MAX_RESULT_CHARS)
    return (f"External worker failure ({agent}, handoff {record.handoff_id}, exit_code={result.exit_code},"
            f" timed_out={str(result.timed_out).lower()}):\n{detail}")


@distinct
class _Recorded(NamedTuple):
    succeeded: bool
    status: str  # completed, failed or record_failed
    fact_id: str | None
    assignment_status: str
    error: str | None


def _record_result(store: LocalStore, record: Assignment, claim: str, agent: str, content: str, succeeded: bool,
                   ctx: RunContext) -> _Recorded:
    """Write the run's fact and return the assignment with it, unless the worker already
    returned its own evidence through the CLI: that evidence stands, and nothing is written."""
    fact_id: str | None = None
    try:
        with store.transaction(write=True):
            now = ctx.clock()
            current, _ = assignments.load(store, record.handoff_id)
            if current.claim_id == claim and current.result_fact_id is not None:
                kept = current.outcome is Outcome.SUCCEEDED
                return _Recorded(kept, "completed" if kept else "failed", current.result_fact_id,
                                 str(current.status), None)
            session = memory.resolve_session(store, record.session_id, record.source_id)
            fact_id = memory.add_fact(
                store, content=content, fact_type=FactType.NOTE if succeeded else FactType.ERROR,
                entities=("ExternalWorker", f"ExternalWorker:{agent}"), tags=("worker-lane", agent, record.handoff_id),
                source_id=record.source_id, actor_id=record.to_actor, now_ms=now, session=session,
            ).fact.id
            returned, _ = assignments.return_result(store, record.handoff_id, record.to_actor, fact_id,
                                                    str(Outcome.SUCCEEDED if succeeded else Outcome.FAILED), now)
            return _Recorded(succeeded, "completed" if succeeded else "failed", fact_id, str(returned.status), None)
    except LocalError as exc:
        return _Recorded(False, "record_failed" if succeeded else "failed", fact_id, str(record.status), str(exc))
