"""One check's view of a local CLI: a fresh store, the verbs a user types, and the MCP calls
upstream's SDK makes (a fresh ``mcp`` process fed ``initialize`` and one ``tools/call``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from conformance.answers import parse
from conformance.errors import ShapeError, Untestable
from conformance.process import CommandExchange, run_command
from conformance.profile import CheckContext
from conformance.profiles.aidememo_local.target import INITIALIZE, LocalTarget
from conformance.race import next_group
from conformance.world import BaseWorld

__all__ = ["LocalWorld", "Assignment", "INITIALIZE", "SOURCE", "SENDER", "RECEIVER", "tool_answer"]

SOURCE = "conformance-team"
SENDER = "sender-one"
RECEIVER = "receiver-two"
# The caller's own variables must not leak into a check: blank is "unset" to upstream's CLI.
_NEUTRAL = {name: "" for name in ("AIDEMEMO_SESSION_ID", "AIDEMEMO_SOURCE_ID", "AIDEMEMO_ACTOR_ID",
                                  "AIDEMEMO_REMOTE_PROFILE", "AIDEMEMO_STORE", "HERMES_KANBAN_TASK",
                                  "HERMES_KANBAN_BOARD")}


@dataclass(frozen=True, slots=True)
class Assignment:
    session_id: str
    handoff_id: str


@dataclass(slots=True)
class LocalWorld(BaseWorld):
    target: LocalTarget = field(kw_only=True)
    _store: str | None = None

    @classmethod
    def build(cls, context: CheckContext) -> LocalWorld:
        return cls(**cls.context_fields(context), target=context.target)

    @property
    def store(self) -> str:
        if self._store is None:
            self._store = f"{self.target.root}/{self.new_id('store')}.sqlite"
        return self._store

    def run(self, *words: str, env: Mapping[str, str] | None = None, stdin: bytes = b"",
            actor: str | None = None, store: str | None = None) -> CommandExchange:
        """One CLI run on this check's store (or on ``store``, a remote account's own)."""
        return run_command(self.transcript, [*self.target.argv, "--store", store or self.store, *words],
                           env={**_NEUTRAL, **(env or {})}, stdin=stdin, timeout_s=self.target.timeout_s,
                           max_output_bytes=self.target.max_output_bytes, actor=actor,
                           unrecorded_env=self.target.environ, launcher=self.target.launcher)

    def json(self, *words: str, env: Mapping[str, str] | None = None) -> Any:
        """A setup step that must succeed with JSON on stdout (else the check is untestable)."""
        done = self.run("--json", *words, env=env)
        done.expect("exit 0 with JSON on stdout (a set-up step)")
        if done.exit_code != 0:
            raise Untestable(f"`{' '.join(words)}` exited {done.exit_code}: {done.stderr.decode(errors='replace').strip()}")
        try:
            return done.json()
        except ShapeError:
            raise Untestable(f"`{' '.join(words)}` printed no JSON: {done.text()[:200]!r}") from None

    def mcp(self, tool: str, arguments: Mapping[str, Any], env: Mapping[str, str] | None = None,
            actor: str | None = None) -> tuple[Any, bool]:
        """(the tool's decoded answer, whether it is an error), as upstream's SDK reads it."""
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": dict(arguments)}}
        done = self.run("mcp", env=env, actor=actor,
                        stdin=f"{json.dumps(INITIALIZE)}\n{json.dumps(call)}\n".encode())
        return tool_answer(done, tool)

    def concurrently(self, commands: Sequence[Sequence[str]], stdins: Sequence[bytes] = (),
                     actor: str | None = None) -> list[CommandExchange]:
        """Start every command at once (each with its stdin, if given) and wait for all (the CAS
        checks' writers); their transcript entries are one concurrency group."""
        gate = threading.Barrier(len(commands))

        def one(command: Sequence[str], stdin: bytes) -> CommandExchange:
            gate.wait()
            return self.run(*command, stdin=stdin, actor=actor)

        # A thread's exception is raised here (an ERROR of the kit), never dropped with its answer.
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            done = list(pool.map(one, commands, stdins or [b""] * len(commands)))
        group = next_group()
        for exchange in done:
            exchange.group.append(group)
        return done

    def assignment(self, receiver_type: str = "manual") -> Assignment:
        """A session in SOURCE (visible there through its start fact), a receiver profile and one
        pending assignment: four commands, as few as the rules allow."""
        session_id = self.json("session", "new", "--source-id", SOURCE, self.text("topic"))["session_id"]
        self.json("agent", "add", RECEIVER, "--type", receiver_type, "--source-id", SOURCE)
        handoff_id = self.json("handoff", "send", RECEIVER, "--from", SENDER, "--source-id", SOURCE, "--focus",
                               self.text("focus"), "--done-when", "checks pass", session_id)["handoff_id"]
        return Assignment(session_id, handoff_id)

    def receiver_fact(self, handoff: Assignment, *, actor: str = RECEIVER, source: str = SOURCE,
                      attached: bool = True) -> str:
        """A fact for a return; by default one every rule accepts."""
        env = {"AIDEMEMO_SESSION_ID": handoff.session_id} if attached and source == SOURCE else {}
        # In another source the session is invisible, so it is attached by name instead.
        link = ["--entities", handoff.session_id] if attached and source != SOURCE else []
        fact_id: str = self.json("fact", "add", self.text("evidence"), "--type", "note", "--source-id", source,
                                 "--actor-id", actor, *link, env=env)["id"]
        return fact_id

    def show(self, handoff: Assignment) -> dict[str, Any]:
        record: dict[str, Any] = self.json("handoff", "show", handoff.handoff_id)
        return record


def tool_answer(done: CommandExchange, tool: str) -> tuple[Any, bool]:
    """(the decoded answer of the ``tools/call`` with id 1 that ``done`` printed, whether it is an error).

    Raises:
        ShapeError: no such answer, or one without the text content upstream's SDK reads.
    """
    step = f"`mcp` {tool}"
    try:
        responses = [parse(line, step, done) for line in done.stdout.splitlines() if line.strip()]
        response = next(r for r in responses if isinstance(r, dict) and r.get("id") == 1)
        result = response["result"]
        answer = parse(result["content"][0]["text"], f"{step} (its text content)", done)
    except (ShapeError, StopIteration) as exc:
        raise ShapeError(f"`mcp` gave no tools/call answer for {tool} ({exc or 'no answer with id 1'}): "
                         f"{done.text()[:300]!r}", entry=done) from None
    return answer, bool(result.get("isError"))
