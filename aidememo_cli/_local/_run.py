"""Run adapters: turn an agent profile into one process, run it with a timeout and heartbeats.

Adapters: ``codex`` and ``claude`` start the vendor CLI as upstream's worker lane does (codex
writes its last message to ``last_message``), with the profile's home (``CODEX_HOME``,
``CLAUDE_CONFIG_DIR``) and the prompt on stdin; ``command`` runs the
profile's command line (split like a shell would, never through a shell) with the packet on
stdin; ``manual`` has no process and is refused. Every adapter sees the handoff through
``AIDEMEMO_*`` variables, so a command can record facts or heartbeats itself.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from refkit.records import distinct
from ._errors import invalid_input
from ._records import AgentProfile, AgentType, EnvPolicy

__all__ = [
    "MAX_RESULT_CHARS",
    "TIMEOUT_EXIT_CODE",
    "Invocation",
    "ProcessResult",
    "build_invocation",
    "run_process",
]

# Upstream worker lane keeps at most 6000 characters of a result.
MAX_RESULT_CHARS = 6000
# The exit status `timeout(1)` reports, which upstream's worker lane also uses.
TIMEOUT_EXIT_CODE = 124

# What `env_policy = core` passes through besides `LC_*` and the profile's `pass_env` names
# (upstream worker lane's list).
_CORE_ENV = ("HOME", "USERPROFILE", "PATH", "SHELL", "USER", "LOGNAME", "LANG", "TMPDIR", "TMP", "TEMP",
             "SSH_AUTH_SOCK", "GIT_SSH_COMMAND")


@distinct
class Invocation(NamedTuple):
    argv: tuple[str, ...]
    cwd: str | None
    env: dict[str, str]
    stdin: str


@distinct
class ProcessResult(NamedTuple):
    exit_code: int
    timed_out: bool
    stdout: str
    stderr: str
    elapsed_ms: int
    heartbeat_count: int
    heartbeat_errors: tuple[str, ...]


def _executable(name: str, cwd: str | None) -> str:
    if os.sep in name:
        path = name if os.path.isabs(name) or cwd is None else os.path.join(cwd, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return name
    elif (found := shutil.which(name)) is not None:
        return found
    raise invalid_input(f"executable {name!r} was not found; install it or fix the agent profile")


def build_invocation(
    profile: AgentProfile,
    *,
    prompt: str,
    handoff_env: Mapping[str, str],
    workspace: str | None,
    environ: Mapping[str, str],
    last_message: str | None = None,
) -> Invocation:
    """Check the profile can run here (binary, workspace) before anything is accepted."""
    if profile.agent is AgentType.MANUAL:
        raise invalid_input(
            f'agent "{profile.alias}" uses the manual adapter; read/accept/heartbeat/return it'
            " through CLI, MCP, or the Python SDK"
        )
    if workspace is not None and not os.path.isdir(workspace):
        raise invalid_input(f"workspace {workspace} is not a directory")
    if profile.agent is AgentType.COMMAND:
        try:
            argv = shlex.split(profile.command or "")
        except ValueError as exc:
            raise invalid_input(f"agent {profile.alias} command line does not parse: {exc}") from exc
        if not argv:
            raise invalid_input(f"agent {profile.alias} has an empty command line")
        argv[0] = _executable(argv[0], workspace)
    else:
        binary = _executable(profile.binary or str(profile.agent), workspace)
        model = ["--model", profile.model] if profile.model else []
        # The worker lane's command lines, without its structured-result schema.
        if profile.agent is AgentType.CODEX:
            argv = [binary, "exec", "--cd", workspace or os.getcwd(), "--sandbox", "workspace-write", "--ephemeral",
                    "--color", "never", "--output-last-message", last_message or os.devnull, *model, "-"]
        else:
            argv = [binary, "--print", "--permission-mode", "acceptEdits", "--output-format", "text",
                    "--no-session-persistence", *model]
    if profile.env_policy is EnvPolicy.ALL:
        env = dict(environ)
    else:
        env = {name: value for name, value in environ.items() if name in _CORE_ENV or name.startswith("LC_")}
        env.update({name: environ[name] for name in profile.pass_env if name in environ})
    if profile.config_home is not None:
        home_var = {AgentType.CODEX: "CODEX_HOME", AgentType.CLAUDE: "CLAUDE_CONFIG_DIR"}.get(profile.agent)
        env[home_var or "AIDEMEMO_AGENT_HOME"] = profile.config_home
    env.update(handoff_env)
    return Invocation(argv=tuple(argv), cwd=workspace, env=env, stdin=prompt)


def run_process(
    invocation: Invocation,
    *,
    timeout_s: float,
    heartbeat_interval_s: float,
    heartbeat: Callable[[], None],
) -> ProcessResult:
    """Run to completion or until the timeout; call ``heartbeat`` every interval meanwhile.

    A heartbeat that fails is recorded, never fatal: liveness bookkeeping must not kill work.
    """
    started = time.monotonic()
    stop = threading.Event()
    beats: list[int] = [0]
    errors: list[str] = []

    def pulse() -> None:
        # The next pulse is scheduled from the previous one's completion, as upstream's lane does.
        while not stop.wait(heartbeat_interval_s):
            try:
                heartbeat()
                beats[0] += 1
            except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
                errors.append(str(exc))

    process = subprocess.Popen(
        invocation.argv,
        cwd=invocation.cwd,
        env=invocation.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a timeout can end the whole process group
    )
    thread = threading.Thread(target=pulse, daemon=True)
    thread.start()
    timed_out = False
    try:
        stdout, stderr = process.communicate(invocation.stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = process.communicate()
    finally:
        stop.set()
        thread.join()
    return ProcessResult(
        exit_code=TIMEOUT_EXIT_CODE if timed_out else process.returncode,
        timed_out=timed_out,
        stdout=stdout or "",
        stderr=stderr or "",
        elapsed_ms=int((time.monotonic() - started) * 1000),
        heartbeat_count=beats[0],
        heartbeat_errors=tuple(errors),
    )
