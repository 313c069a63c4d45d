"""``aidememo-ref`` local command groups: session, fact, agent, config, handoff.

Token-free: one embedded SQLite store chosen by ``--store PATH`` (else ``AIDEMEMO_STORE``, else
``~/.aidememo/local.sqlite``), self-declared actor aliases, no server. Every command runs in one
transaction; every refusal prints one line on stderr (``Error: <text>``, or a JSON error object
with ``--json``) and exits non-zero. Start-up matters (agents call this dozens of times per
task), so this module imports only the standard library and ``aidememo_ref._local``; the run
adapters are imported only by ``handoff run``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from aidememo_ref._local._errors import LocalError, LocalErrorCode, invalid_input
from aidememo_ref._local._ids import new_handoff_id, new_session_id, new_ulid, new_worker_claim
from aidememo_ref._local._packet import (
    DEFAULT_PACKET_LIMIT,
    PROGRAM,
    Route,
    as_shell_comment,
    export_lines,
    render_packet,
    resume_command,
    shell_quote,
)
from aidememo_ref._local._records import (
    AgentProfile,
    AgentType,
    Assignment,
    EnvPolicy,
    Fact,
    FactType,
    Outcome,
    Session,
    Status,
)
from aidememo_ref._local import _rules as rules
from aidememo_ref._local._scope import (
    SETTING_KEYS,
    Settings,
    load_settings,
    parse_setting,
    resolve_actor,
    resolve_source,
)
from aidememo_ref._local._store import LocalStore

__all__ = ["main"]

_ALIAS = re.compile(r"[A-Za-z0-9._-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)?")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DEFAULT_STORE = os.path.join("~", ".aidememo", "local.sqlite")


class UsageError(Exception):
    """Bad command-line syntax (argparse's complaint, turned into one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """Everything a command needs besides its arguments."""

    store_path: str
    store_args: str  # " --store '...'" when the store was chosen by flag, for printed commands
    as_json: bool
    now_ms: int  # the command's time, read once so one command sees one instant
    clock: Callable[[], int]  # for later instants (heartbeats and results of `handoff run`)
    env: Mapping[str, str]
    out: Callable[[str], None]
    err: Callable[[str], None]


# ----------------------------------------------------------------------------- helpers


def _emit(ctx: Context, data: object, text: str) -> None:
    ctx.out(json.dumps(data, indent=2, ensure_ascii=False) if ctx.as_json else text)


def _open(ctx: Context) -> LocalStore:
    return LocalStore(ctx.store_path)


def _settings(store: LocalStore, ctx: Context) -> Settings:
    return load_settings(store.settings(), ctx.env)


def _require_actor(flag: str | None, settings: Settings, ctx: Context) -> str:
    actor = resolve_actor(flag, settings, ctx.env)
    if actor is None:
        raise invalid_input("actor_id required: pass --actor-id or set AIDEMEMO_ACTOR_ID")
    return rules.check_actor("actor_id", actor)


def _limit(value: int) -> int:
    if value < 1:
        raise invalid_input("limit must be at least 1")
    return value


def _session(store: LocalStore, session_id: str, source_id: str | None) -> Session:
    """The session, visible in ``source_id`` (a session with no source is visible everywhere)."""
    session = store.get_session(session_id)
    if session is None or (
        source_id is not None and session.source_id is not None and session.source_id != source_id
    ):
        raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, session_id)
    return session


def _active_session_id(positional: str | None, ctx: Context) -> str:
    session_id = (positional or ctx.env.get("AIDEMEMO_SESSION_ID") or "").strip()
    if not session_id:
        raise invalid_input("no session: pass SESSION or set AIDEMEMO_SESSION_ID")
    return session_id


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _packet_for(
    store: LocalStore,
    ctx: Context,
    *,
    session: Session,
    source_id: str | None,
    route: Route,
    focus: str | None,
    done_when: str | None,
    limit: int = DEFAULT_PACKET_LIMIT,
    assignment: Assignment | None = None,
) -> tuple[str, str]:
    """(packet, resume command), rebuilt from the session's current facts."""
    facts, total = store.session_facts(session.session_id, source_id, limit)
    resume = resume_command(ctx.store_args, session.session_id, source_id)
    packet = render_packet(
        session=session,
        facts=facts,
        total_facts=total,
        source_id=source_id,
        route=route,
        focus=focus,
        done_when=done_when,
        resume=resume,
        store_args=ctx.store_args,
        assignment=assignment,
    )
    return packet, resume


def _route_of(record: Assignment) -> Route:
    return Route(
        from_actor=record.from_actor,
        from_agent=record.from_agent,
        from_profile=record.from_profile,
        to_actor=record.to_actor,
        to_agent=record.to_agent,
        to_profile=record.to_profile,
    )


def _new_fact(
    ctx: Context,
    *,
    content: str,
    fact_type: FactType,
    entities: Sequence[str],
    source_id: str | None,
    actor_id: str | None,
    now_ms: int | None = None,
) -> Fact:
    now = ctx.now_ms if now_ms is None else now_ms
    unique = tuple(dict.fromkeys(entity for entity in (e.strip() for e in entities) if entity))
    return Fact(
        fact_id=new_ulid(now),
        fact_type=fact_type,
        content=content,
        entities=unique,
        source_id=source_id,
        actor_id=actor_id,
        created_at=now,
    )


# ----------------------------------------------------------------------------- session


def cmd_session_new(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        settings = _settings(store, ctx)
        source_id = resolve_source(args.source_id, settings, ctx.env)
        session = Session(
            session_id=new_session_id(ctx.now_ms),
            topic=" ".join(args.topic),
            source_id=source_id,
            created_by=resolve_actor(args.actor_id, settings, ctx.env),
            created_at=ctx.now_ms,
        )
        store.insert_session(session)
    env = {"AIDEMEMO_SESSION_ID": session.session_id}
    if source_id is not None:
        env["AIDEMEMO_SOURCE_ID"] = source_id
    exports = export_lines(env)
    topic_line = " ".join(session.topic.split())
    _emit(
        ctx,
        {"session_id": session.session_id, "topic": session.topic, "source_id": source_id, "export": exports},
        f"# aidememo session: {topic_line}\n# id: {session.session_id}\n{exports}",
    )
    return 0


def cmd_session_resume(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        source_id = resolve_source(args.source_id, _settings(store, ctx), ctx.env)
        session = _session(store, args.session, source_id)
    scope = source_id if source_id is not None else session.source_id
    env: dict[str, str | None] = {"AIDEMEMO_SESSION_ID": session.session_id, "AIDEMEMO_SOURCE_ID": scope}
    exports = export_lines(env)
    topic_line = " ".join(session.topic.split())
    _emit(
        ctx,
        {"session_id": session.session_id, "topic": session.topic, "source_id": scope, "env": env, "export": exports},
        f"# aidememo resume: {topic_line}\n# id: {session.session_id}\n{exports}",
    )
    return 0


def _agent_profile_pair(value: str | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    agent, _, profile = value.partition("/")
    return agent.strip() or None, profile.strip() or None


def cmd_session_handoff(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    assignment: Assignment | None = None
    with store.transaction(write=args.dispatch):
        settings = _settings(store, ctx)
        session_id = _active_session_id(args.session, ctx)
        source_id = resolve_source(args.source_id, settings, ctx.env)
        session = _session(store, session_id, source_id)
        scope = source_id if source_id is not None else session.source_id
        from_agent, from_profile = _agent_profile_pair(args.route_from)
        to_agent, to_profile = _agent_profile_pair(args.route_to)
        route = Route(
            from_actor=resolve_actor(args.from_actor, settings, ctx.env),
            from_agent=from_agent,
            from_profile=from_profile,
            to_actor=(args.to_actor or "").strip() or None,
            to_agent=to_agent,
            to_profile=to_profile,
        )
        if args.dispatch:
            if route.from_actor is None:
                raise invalid_input("set AIDEMEMO_ACTOR_ID or pass --from-actor with the sending account alias")
            if route.to_actor is None:
                raise invalid_input("--dispatch needs --to-actor with the receiving account alias")
            assignment = rules.new_assignment(
                handoff_id=new_handoff_id(ctx.now_ms),
                session_id=session.session_id,
                source_id=scope,
                from_actor=route.from_actor,
                to_actor=route.to_actor,
                from_agent=route.from_agent,
                from_profile=route.from_profile,
                to_agent=route.to_agent,
                to_profile=route.to_profile,
                focus=args.focus,
                done_when=args.done_when,
                upstream_task_id=None,
                upstream_board_id=None,
                now_ms=ctx.now_ms,
            )
            store.insert_handoff(assignment)
        packet, resume = _packet_for(
            store,
            ctx,
            session=session,
            source_id=scope,
            route=route,
            focus=args.focus,
            done_when=args.done_when,
            limit=_limit(args.limit),
            assignment=assignment,
        )
        _, total = store.session_facts(session.session_id, scope, 1)
    if args.output is not None:
        try:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(packet)
        except OSError as exc:
            raise invalid_input(f"cannot write packet to {args.output}: {exc.strerror}") from exc
    size = len(packet.encode("utf-8"))
    data = {
        "artifact": "agent_handoff",
        "session_id": session.session_id,
        "topic": session.topic,
        "fact_count": min(total, args.limit),
        "source_id": scope,
        "handoff_id": None if assignment is None else assignment.handoff_id,
        "status": None if assignment is None else str(assignment.status),
        "dispatched": assignment is not None,
        "from_actor": route.from_actor,
        "from_agent": route.from_agent,
        "from_profile": route.from_profile,
        "to_agent": route.to_agent,
        "to_profile": route.to_profile,
        "to_actor": route.to_actor,
        "focus": args.focus,
        "done_when": args.done_when,
        "resume": {"command": resume, "env": {"AIDEMEMO_SESSION_ID": session.session_id, "AIDEMEMO_SOURCE_ID": scope}},
        "bytes": size,
        "output": args.output,
        "content": packet,
    }
    text = packet.rstrip("\n") if args.output is None else f"Wrote handoff packet to {args.output} ({size} bytes)"
    if assignment is not None:
        text += f"\nAssignment: {assignment.from_actor} -> {assignment.to_actor} [{assignment.handoff_id}]"
    _emit(ctx, data, text)
    return 0


# ----------------------------------------------------------------------------- fact


def cmd_fact_add(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        settings = _settings(store, ctx)
        source_id = resolve_source(args.source_id, settings, ctx.env)
        actor = resolve_actor(args.actor_id, settings, ctx.env)
        if actor is not None:
            actor = rules.check_actor("actor_id", actor)
        entities = [item for chunk in args.entities for item in chunk.split(",")]
        attached: str | None = None
        if not args.no_session:
            session_id = (args.session_id or ctx.env.get("AIDEMEMO_SESSION_ID") or "").strip()
            if session_id:
                session = store.get_session(session_id)
                explicit = args.session_id is not None
                if session is None and explicit:
                    raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, session_id)
                # The active session is attached only where it is visible (upstream's hook).
                if session is not None and (session.source_id is None or session.source_id == source_id):
                    attached = session_id
                elif explicit:
                    raise invalid_input(
                        f"session {session_id} is not visible in source {source_id or '(none)'}"
                    )
        if attached is not None:
            entities.append(attached)
        fact = _new_fact(
            ctx,
            content=args.content,
            fact_type=FactType(args.type),
            entities=entities,
            source_id=source_id,
            actor_id=actor,
        )
        store.insert_fact(fact)
    data = fact.to_json() | {"session_id": attached}
    where = f" session={attached}" if attached else ""
    _emit(ctx, data, f"Added fact {fact.fact_id} [{fact.fact_type}]{where}")
    return 0


def cmd_fact_get(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        fact = store.get_fact(args.fact_id.strip())
    if fact is None:
        raise LocalError(LocalErrorCode.FACT_NOT_FOUND, args.fact_id.strip())
    text = (
        f"{fact.fact_id} [{fact.fact_type}] source={_dash(fact.source_id)} actor={_dash(fact.actor_id)}"
        f" entities={','.join(fact.entities) or '-'}\n{fact.content}"
    )
    _emit(ctx, fact.to_json(), text)
    return 0


# ----------------------------------------------------------------------------- agent


def _directory(flag: str, value: str | None) -> str | None:
    if value is None:
        return None
    path = os.path.abspath(os.path.expanduser(value))
    if not os.path.isdir(path):
        raise invalid_input(f"{flag} {value} is not a directory")
    return path


def _alias(value: str) -> str:
    if not _ALIAS.fullmatch(value):
        raise invalid_input(f"agent alias {value!r} must use only ASCII letters, digits, '.', '_' or '-'")
    return value


def _profile_text(profile: AgentProfile) -> str:
    return (
        f"  {profile.alias} ({profile.agent}) workspace={_dash(profile.workspace)}"
        f" source={_dash(profile.source_id)}"
    )


def cmd_agent_add(args: argparse.Namespace, ctx: Context) -> int:
    for name in args.pass_env:
        if not _ENV_NAME.fullmatch(name):
            raise invalid_input(f"--pass-env takes a variable name, not {name!r}")
    profile = AgentProfile(
        alias=_alias(args.alias),
        agent=AgentType(args.type),
        binary=args.binary,
        config_home=_directory("--home", args.home),
        workspace=_directory("--workspace", args.workspace),
        source_id=(args.source_id or "").strip() or None,
        model=args.model,
        env_policy=EnvPolicy(args.env_policy),
        pass_env=tuple(args.pass_env),
        command=args.command,
    )
    store = _open(ctx)
    with store.transaction(write=True):
        replaced = store.put_agent(profile)
    verb = "Updated" if replaced else "Added"
    _emit(
        ctx,
        {"alias": profile.alias, "replaced": replaced, "installation": profile.to_json()},
        f"{verb} agent profile {profile.alias} ({profile.agent})",
    )
    return 0


def _get_profile(store: LocalStore, alias: str) -> AgentProfile:
    profile = store.get_agent(alias)
    if profile is None:
        raise invalid_input(
            f'agent "{alias}" is not connected; add it with `{PROGRAM} agent add {alias} --type codex`'
        )
    return profile


def cmd_agent_list(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        profiles = store.list_agents()
    lines = [f"{len(profiles)} agent profile(s):", *map(_profile_text, profiles)] if profiles else ["(no agent profiles)"]
    _emit(ctx, {"agents": [p.to_json() for p in profiles]}, "\n".join(lines))
    return 0


def cmd_agent_show(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        profile = _get_profile(store, args.alias)
    data = profile.to_json()
    text = "\n".join(
        f"{key}: {', '.join(value) if isinstance(value, list) else _dash(value)}" for key, value in data.items()
    )
    _emit(ctx, data, text)
    return 0


def cmd_agent_remove(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        _get_profile(store, args.alias)
        store.remove_agent(args.alias)
    _emit(ctx, {"alias": args.alias, "removed": True}, f"Removed agent profile {args.alias}")
    return 0


# ----------------------------------------------------------------------------- config


def cmd_config_set(args: argparse.Namespace, ctx: Context) -> int:
    value = parse_setting(args.key, args.value, "config set")
    store = _open(ctx)
    with store.transaction(write=True):
        store.set_setting(args.key, value)
    _emit(ctx, {"key": args.key, "value": value}, f"Set {args.key} = {value}")
    return 0


def cmd_config_unset(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        store.set_setting(args.key, None)
    _emit(ctx, {"key": args.key, "value": None}, f"Unset {args.key}")
    return 0


def cmd_config_list(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        stored = store.settings()
        effective = _settings(store, ctx)
    shown = {
        "source_id": effective.source_id,
        "source_from_hermes": str(effective.source_from_hermes),
        "actor_from_hermes_profile": effective.actor_from_hermes_profile,
    }
    data = {"stored": stored, "effective": shown}
    text = "\n".join(f"{key} = {value}" for key, value in shown.items())
    _emit(ctx, data, text)
    return 0


# ----------------------------------------------------------------------------- handoff


def cmd_handoff_send(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        settings = _settings(store, ctx)
        sender = resolve_actor(args.from_actor, settings, ctx.env)
        if sender is None:
            raise invalid_input("set AIDEMEMO_ACTOR_ID or pass --from with the sending account alias")
        profile = _get_profile(store, args.alias)
        session_id = _active_session_id(args.session, ctx)
        session = store.get_session(session_id)
        if session is None:
            raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, session_id)
        source_id = resolve_source(args.source_id, settings, ctx.env) or profile.source_id or session.source_id
        _session(store, session_id, source_id)
        task = (args.kanban_task or ctx.env.get("HERMES_KANBAN_TASK") or "").strip() or None
        board = (args.kanban_board or ctx.env.get("HERMES_KANBAN_BOARD") or "").strip() or None
        record = rules.new_assignment(
            handoff_id=new_handoff_id(ctx.now_ms),
            session_id=session_id,
            source_id=source_id,
            from_actor=sender,
            to_actor=profile.alias,
            to_agent=str(profile.agent),
            focus=args.focus,
            done_when=args.done_when,
            upstream_task_id=task,
            upstream_board_id=board,
            now_ms=ctx.now_ms,
        )
        store.insert_handoff(record)
    text = (
        f"Sent handoff {record.handoff_id} to {profile.alias} [{record.status}]\n"
        f"Session: {session_id}\n"
        f"Run: {PROGRAM}{ctx.store_args} handoff run {profile.alias}\n"
        f"Show: {PROGRAM}{ctx.store_args} handoff show {record.handoff_id}"
    )
    _emit(ctx, record.to_json(), text)
    return 0


def _mailbox(args: argparse.Namespace, ctx: Context, *, outbox: bool) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        settings = _settings(store, ctx)
        actor = _require_actor(args.actor_id, settings, ctx)
        source_id = resolve_source(args.source_id, settings, ctx.env)
        include_completed = (not args.pending_only or args.include_completed) if outbox else args.include_completed
        records = store.mailbox(
            column="from_actor" if outbox else "to_actor",
            actor=actor,
            source_id=source_id,
            include_completed=include_completed,
            limit=_limit(args.limit),
        )
    if outbox:
        head = f"{len(records)} sent handoff assignment(s) from {actor}:"
        empty = f"(no sent handoff assignments for {actor})"
        rows = [
            f"  {r.handoff_id} [{r.status}] session={r.session_id} to={r.to_actor}"
            f" outcome={_dash(r.outcome)} result={_dash(r.result_fact_id)}"
            for r in records
        ]
    else:
        head = f"{len(records)} handoff assignment(s) for {actor}:"
        empty = f"(no handoff assignments for {actor})"
        rows = [
            f"  {r.handoff_id} [{r.status}] session={r.session_id} from={r.from_actor} focus={r.focus or '-'}"
            for r in records
        ]
    data = {"actor_id": actor, "source_id": source_id, "assignments": [r.to_json() for r in records]}
    _emit(ctx, data, "\n".join([head, *rows]) if records else empty)
    return 0


def cmd_handoff_inbox(args: argparse.Namespace, ctx: Context) -> int:
    return _mailbox(args, ctx, outbox=False)


def cmd_handoff_outbox(args: argparse.Namespace, ctx: Context) -> int:
    return _mailbox(args, ctx, outbox=True)


def _record_text(record: Assignment) -> str:
    return (
        f"Handoff {record.handoff_id} [{record.status}] {record.from_actor} -> {record.to_actor}"
        f" session={record.session_id} outcome={_dash(record.outcome)} result={_dash(record.result_fact_id)}"
    )


def cmd_handoff_show(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        record, _ = store.load_handoff(args.handoff_id)
    _emit(ctx, record.to_json(), _record_text(record))
    return 0


def cmd_handoff_status(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=False):
        actor = _require_actor(args.actor_id, _settings(store, ctx), ctx)
        record, _ = store.load_handoff(args.handoff_id)
        rules.check_status_reader(record, actor)
    _emit(ctx, record.to_json(), _record_text(record))
    return 0


def _accept_in(
    store: LocalStore, ctx: Context, handoff_id: str, actor: str, claim_id: str | None
) -> tuple[Assignment, bool, str, str]:
    """Accept inside the caller's transaction and render the packet before it commits, so a
    packet that cannot be built leaves the assignment untouched."""
    record, updated_at = store.load_handoff(handoff_id)
    accepted = rules.accept(record, actor, claim_id, ctx.now_ms)
    current = record if accepted is None else accepted
    session = _session(store, current.session_id, current.source_id)
    packet, resume = _packet_for(
        store,
        ctx,
        session=session,
        source_id=current.source_id,
        route=_route_of(current),
        focus=current.focus,
        done_when=current.done_when,
        assignment=current,
    )
    if accepted is not None:
        store.write_handoff(accepted, updated_at, ctx.now_ms)
    return current, accepted is not None, packet, resume


def _resume_env(record: Assignment) -> dict[str, str | None]:
    return {
        "AIDEMEMO_SESSION_ID": record.session_id,
        "AIDEMEMO_SOURCE_ID": record.source_id,
        "AIDEMEMO_ACTOR_ID": record.to_actor,
    }


def cmd_handoff_accept(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        actor = _require_actor(args.actor_id, _settings(store, ctx), ctx)
        record, changed, packet, resume = _accept_in(store, ctx, args.handoff_id, actor, args.claim_id)
    env = _resume_env(record)
    head = (
        f"Accepted assignment `{record.handoff_id}` (attempt {record.attempt_count})"
        if changed
        else f"Assignment `{record.handoff_id}` was already accepted by {actor}; nothing changed"
    )
    # Eval-able: the packet travels as shell comments, the exports come last.
    text = as_shell_comment(f"{head}\n\n{packet}\nResume: {resume}") + "\n" + export_lines(env)
    data = {
        "assignment": record.to_json(),
        "changed": changed,
        "resume": {"command": resume, "env": env},
        "content": packet,
    }
    _emit(ctx, data, text)
    return 0


def cmd_handoff_heartbeat(args: argparse.Namespace, ctx: Context) -> int:
    store = _open(ctx)
    with store.transaction(write=True):
        actor = _require_actor(args.actor_id, _settings(store, ctx), ctx)
        record, updated_at = store.load_handoff(args.handoff_id)
        record = rules.heartbeat(record, actor, ctx.now_ms)
        store.write_handoff(record, updated_at, ctx.now_ms)
    _emit(
        ctx,
        record.to_json(),
        f"Heartbeat {record.handoff_id} count={record.heartbeat_count} at={record.last_heartbeat_at}",
    )
    return 0


def cmd_handoff_return(args: argparse.Namespace, ctx: Context) -> int:
    outcome = rules.parse_outcome(args.outcome)  # checked before anything is loaded
    store = _open(ctx)
    with store.transaction(write=True):
        actor = _require_actor(args.actor_id, _settings(store, ctx), ctx)
        record, updated_at = store.load_handoff(args.handoff_id)
        fact = store.get_fact(args.result_fact_id.strip())
        returned = rules.return_result(record, actor, outcome, args.result_fact_id, fact, ctx.now_ms)
        if returned is not None:
            store.write_handoff(returned, updated_at, ctx.now_ms)
    current = record if returned is None else returned
    tail = f"outcome={current.outcome} status={current.status} result={current.result_fact_id}"
    if returned is None:
        note = f"Handoff {current.handoff_id} already returned with this evidence; nothing changed ({tail})"
        if ctx.as_json:
            ctx.err(f"note: {note}")
        _emit(ctx, current.to_json(), note)
    else:
        _emit(ctx, current.to_json(), f"Returned handoff {current.handoff_id} {tail}")
    return 0


def _duration_ms(text: str) -> int:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise invalid_input(f"invalid duration {text!r}; use e.g. 90s, 15m, 1h, 2d or 500ms")
    return int(match.group(1)) * _UNIT_MS[match.group(2) or "s"]


def cmd_handoff_board(args: argparse.Namespace, ctx: Context) -> int:
    stale_after = (
        rules.DEFAULT_STALE_AFTER_MS if args.stale_after is None else rules.check_stale_after(_duration_ms(args.stale_after))
    )
    limit = _limit(args.limit)
    store = _open(ctx)
    with store.transaction(write=False):
        settings = _settings(store, ctx)
        actor = resolve_actor(args.actor_id, settings, ctx.env) if args.actor_id or args.mine else None
        source_id = resolve_source(args.source_id, settings, ctx.env)
        records = store.all_handoffs(include_completed=args.include_completed)
    chosen = [
        r
        for r in records
        if (actor is None or actor in (r.from_actor, r.to_actor)) and (source_id is None or r.source_id == source_id)
    ]
    items = [rules.board_item(r, ctx.now_ms, stale_after) for r in chosen]
    items.sort(key=lambda item: (item.last_activity_at, item.assignment.handoff_id), reverse=True)
    items = items[:limit]
    lanes = {str(lane): sum(item.lane is lane for item in items) for lane in rules.Lane}
    data = {
        "generated_at": ctx.now_ms,
        "stale_after_ms": stale_after,
        "lifecycle_owner": "upstream_orchestrator",
        "lanes": lanes,
        "assignments": [item.to_json() for item in items],
    }
    head = "Handoff board: " + " ".join(f"{lane}={count}" for lane, count in lanes.items())
    rows = [
        f"  {i.assignment.handoff_id} [{i.lane}] {i.assignment.from_actor} -> {i.assignment.to_actor}"
        f" next={i.next_action} owner={i.lifecycle_owner}"
        for i in items
    ]
    _emit(ctx, data, "\n".join([head, *(rows or ["(no handoff assignments)"])]))
    return 0


def _positive_seconds(flag: str, value: float) -> float:
    if not value > 0:
        raise invalid_input(f"{flag} must be greater than zero seconds")
    return value


def cmd_handoff_run(args: argparse.Namespace, ctx: Context) -> int:
    from aidememo_ref._local import _run  # subprocess and threads only when running

    if args.handoff_id is not None and args.next:
        raise invalid_input("pass either HANDOFF_ID or --next, not both")
    timeout_s = _positive_seconds("--timeout", args.timeout)
    interval_s = _positive_seconds("--heartbeat-interval", args.heartbeat_interval)
    store = _open(ctx)
    with store.transaction(write=False):
        profile = _get_profile(store, _alias(args.alias))
    workspace = _directory("--workspace", args.workspace) or profile.workspace
    # Fail before accepting: a run that cannot start must not claim the assignment.
    _run.build_invocation(profile, prompt="", handoff_env={}, workspace=workspace, environ=ctx.env)
    claim = new_worker_claim()
    with store.transaction(write=True):
        if args.handoff_id is not None:
            handoff_id = args.handoff_id
        else:
            pending = store.mailbox(
                column="to_actor",
                actor=profile.alias,
                source_id=profile.source_id,
                include_completed=False,
                limit=None,
                oldest_first=True,
            )
            pending = [r for r in pending if r.status is Status.PENDING]
            if not pending:
                raise invalid_input(f"no pending handoff assignment for {profile.alias}")
            handoff_id = pending[0].handoff_id
        record, _, packet, _ = _accept_in(store, ctx, handoff_id, profile.alias, claim)
    handoff_env = {
        "AIDEMEMO_STORE": os.path.abspath(ctx.store_path),
        "AIDEMEMO_HANDOFF_ID": record.handoff_id,
        "AIDEMEMO_SESSION_ID": record.session_id,
        "AIDEMEMO_ACTOR_ID": profile.alias,
        "AIDEMEMO_CLAIM_ID": claim,
    }
    if record.source_id is not None:
        handoff_env["AIDEMEMO_SOURCE_ID"] = record.source_id
    if record.upstream_task_id is not None:
        handoff_env["HERMES_KANBAN_TASK"] = record.upstream_task_id
    prompt = (
        f"{packet}\nYou are {profile.alias}, working on handoff {record.handoff_id}. Do the requested focus"
        " in this workspace, then print a short result summary (what you did, what is left) on stdout.\n"
    )
    invocation = _run.build_invocation(
        profile, prompt=prompt, handoff_env=handoff_env, workspace=workspace, environ=ctx.env
    )

    def beat() -> None:
        # Each pulse is its own connection and transaction: the runner holds no lock meanwhile.
        pulse_store = LocalStore(ctx.store_path)
        try:
            with pulse_store.transaction(write=True):
                current, updated_at = pulse_store.load_handoff(record.handoff_id)
                now = ctx.clock()
                pulse_store.write_handoff(rules.heartbeat(current, profile.alias, now), updated_at, now)
        finally:
            pulse_store.close()

    result = _run.run_process(invocation, timeout_s=timeout_s, heartbeat_interval_s=interval_s, heartbeat=beat)
    succeeded = result.exit_code == 0 and bool(result.stdout.strip())
    now = ctx.clock()
    if succeeded:
        content = f"Handoff {record.handoff_id} result from {profile.alias} ({profile.agent}):\n"
        content += result.stdout.strip()[: _run.MAX_RESULT_CHARS]
    else:
        why = f"timed out after {timeout_s:g} s" if result.timed_out else f"exited {result.exit_code}"
        detail = (result.stderr.strip() or result.stdout.strip() or "(no output)")[-_run.MAX_RESULT_CHARS :]
        content = f"Handoff {record.handoff_id} failed with {profile.alias} ({profile.agent}): {why}\n{detail}"
    fact = _new_fact(
        ctx,
        content=content,
        fact_type=FactType.NOTE if succeeded else FactType.ERROR,
        entities=(record.session_id, "ExternalWorker", f"ExternalWorker:{profile.agent}"),
        source_id=record.source_id,
        actor_id=profile.alias,
        now_ms=now,
    )
    planned = Outcome.SUCCEEDED if succeeded else Outcome.FAILED
    outcome: Outcome | None = planned
    error: str | None = None
    try:
        with store.transaction(write=True):
            current, updated_at = store.load_handoff(record.handoff_id)
            if current.claim_id == claim and current.result_fact_id is not None:
                # The worker returned its own evidence through the CLI: that evidence stands,
                # and the runner adds nothing.
                outcome, content = current.outcome, f"returned by the worker itself: {current.result_fact_id}"
            else:
                store.insert_fact(fact)
                returned = rules.return_result(current, profile.alias, planned, fact.fact_id, fact, now)
                if returned is not None:
                    store.write_handoff(returned, updated_at, now)
                    current = returned
        succeeded = outcome is Outcome.SUCCEEDED
        status = "completed" if succeeded else "failed"
    except LocalError as exc:
        succeeded, error, status = False, str(exc), "record_failed"
        current, _ = _reload(store, record.handoff_id)
    evidence = current.result_fact_id if error is None else None
    data: dict[str, Any] = {
        "ok": succeeded,
        "status": status,
        "handoff_id": record.handoff_id,
        "actor_id": profile.alias,
        "agent": str(profile.agent),
        "session_id": record.session_id,
        "source_id": record.source_id,
        "kanban_task": record.upstream_task_id,
        "claim_id": claim,
        "command": list(invocation.argv),
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "elapsed_ms": result.elapsed_ms,
        "result": content,
        "result_fact_id": evidence if succeeded else None,
        "error_fact_id": None if succeeded else evidence,
        "assignment_status": str(current.status),
        "error": error,
        "heartbeat_count": result.heartbeat_count,
        "heartbeat_errors": list(result.heartbeat_errors),
    }
    text = (
        f"Ran handoff {record.handoff_id} with {profile.alias} ({profile.agent}): status={status}"
        f" outcome={_dash(outcome)} assignment={current.status} fact={_dash(evidence)}"
    )
    _emit(ctx, data, text)
    if not data["ok"]:
        ctx.err(f"Error: handoff {record.handoff_id} {status}: {error or content.splitlines()[0]}")
        return 1
    return 0


def _reload(store: LocalStore, handoff_id: str) -> tuple[Assignment, int]:
    with store.transaction(write=False):
        return store.load_handoff(handoff_id)


# ----------------------------------------------------------------------------- parser


def _test_clock(env: Mapping[str, str]) -> int | None:
    """``AIDEMEMO_NOW_MS`` pins the clock (tests only), so staleness is tested without sleeping."""
    text = env.get("AIDEMEMO_NOW_MS")
    if text is None or not text.strip():
        return None
    try:
        return int(text)
    except ValueError:
        raise invalid_input("AIDEMEMO_NOW_MS must be an integer number of milliseconds") from None


def _command(sub: Any, name: str, func: Callable[[argparse.Namespace, Context], int], help_text: str,
             common: _Parser) -> _Parser:
    p: _Parser = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
    p.set_defaults(func=func)
    return p


def _add_session(groups: Any, common: _Parser) -> None:
    session = groups.add_parser("session", help="tracked sessions").add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    p = _command(session, "new", cmd_session_new, "start a tracked session; prints eval-able exports", common)
    p.add_argument("--source-id")
    p.add_argument("--actor-id")
    p.add_argument("topic", nargs="+", metavar="TOPIC")
    p = _command(session, "resume", cmd_session_resume, "print the exports that resume a session", common)
    p.add_argument("--source-id")
    p.add_argument("session", metavar="SESSION")
    p = _command(session, "handoff", cmd_session_handoff, "preview the read-only handoff packet", common)
    p.add_argument("--from", dest="route_from", metavar="AGENT[/PROFILE]")
    p.add_argument("--to", dest="route_to", metavar="AGENT[/PROFILE]")
    p.add_argument("--from-actor")
    p.add_argument("--to-actor")
    p.add_argument("--focus")
    p.add_argument("--done-when")
    p.add_argument("--source-id")
    p.add_argument("--limit", type=int, default=DEFAULT_PACKET_LIMIT)
    p.add_argument("--output", metavar="PATH")
    p.add_argument("--dispatch", action="store_true", help="also send it: store an assignment to --to-actor")
    p.add_argument("session", nargs="?", metavar="SESSION")


def _add_fact(groups: Any, common: _Parser) -> None:
    fact = groups.add_parser("fact", help="facts").add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    p = _command(fact, "add", cmd_fact_add, "record a fact (attached to the active session)", common)
    p.add_argument("content", metavar="CONTENT")
    p.add_argument("--type", default=str(FactType.NOTE), choices=[str(t) for t in FactType])
    p.add_argument("--entities", action="append", default=[], metavar="A,B")
    p.add_argument("--source-id")
    p.add_argument("--actor-id")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--session-id", help="attach to this session instead of $AIDEMEMO_SESSION_ID")
    where.add_argument("--no-session", action="store_true", help="do not attach the active session")
    p = _command(fact, "get", cmd_fact_get, "print one fact", common)
    p.add_argument("fact_id", metavar="FACT_ID")


def _add_agent(groups: Any, common: _Parser) -> None:
    agent = groups.add_parser("agent", help="agent profiles (no credentials)").add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    p = _command(agent, "add", cmd_agent_add, "add or update an agent profile", common)
    p.add_argument("alias", metavar="ALIAS")
    p.add_argument("--type", required=True, choices=[str(t) for t in AgentType])
    p.add_argument("--home", help="the agent's own config home (passed as CODEX_HOME / CLAUDE_CONFIG_DIR)")
    p.add_argument("--workspace")
    p.add_argument("--source-id")
    p.add_argument("--model")
    p.add_argument("--binary")
    p.add_argument("--command", help="command line for --type command (packet on stdin)")
    p.add_argument("--env-policy", default=str(EnvPolicy.CORE), choices=[str(e) for e in EnvPolicy])
    p.add_argument("--pass-env", action="append", default=[], metavar="NAME")
    _command(agent, "list", cmd_agent_list, "list agent profiles", common)
    p = _command(agent, "show", cmd_agent_show, "show one agent profile", common)
    p.add_argument("alias", metavar="ALIAS")
    p = _command(agent, "remove", cmd_agent_remove, "remove an agent profile", common)
    p.add_argument("alias", metavar="ALIAS")


def _add_config(groups: Any, common: _Parser) -> None:
    config = groups.add_parser("config", help="store settings (source_id, Hermes mapping)").add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    p = _command(config, "set", cmd_config_set, "store a setting", common)
    p.add_argument("key", choices=list(SETTING_KEYS))
    p.add_argument("value")
    p = _command(config, "unset", cmd_config_unset, "remove a stored setting", common)
    p.add_argument("key", choices=list(SETTING_KEYS))
    _command(config, "list", cmd_config_list, "stored and effective settings", common)


def _add_handoff(groups: Any, common: _Parser) -> None:
    handoff = groups.add_parser("handoff", help="assignments").add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    p = _command(handoff, "send", cmd_handoff_send, "assign the active session to an agent", common)
    p.add_argument("alias", metavar="ALIAS")
    p.add_argument("--from", dest="from_actor", metavar="ACTOR")
    p.add_argument("--source-id")
    p.add_argument("--focus")
    p.add_argument("--done-when")
    p.add_argument("--kanban-task")
    p.add_argument("--kanban-board")
    p.add_argument("session", nargs="?", metavar="SESSION")
    p.set_defaults(trailing="session")
    for name, func, help_text in (
        ("inbox", cmd_handoff_inbox, "assignments addressed to an actor"),
        ("outbox", cmd_handoff_outbox, "assignments an actor sent"),
    ):
        p = _command(handoff, name, func, help_text, common)
        p.add_argument("--actor-id")
        p.add_argument("--source-id")
        p.add_argument("--include-completed", action="store_true")
        p.add_argument("-l", "--limit", type=int, default=20)
        if name == "outbox":
            p.add_argument("--pending-only", action="store_true")
        else:
            p.set_defaults(pending_only=False)
    p = _command(handoff, "show", cmd_handoff_show, "print an assignment", common)
    p.add_argument("handoff_id", metavar="HANDOFF_ID")
    for name, func, help_text in (
        ("status", cmd_handoff_status, "print an assignment (sender or receiver)"),
        ("accept", cmd_handoff_accept, "accept; prints the packet and eval-able resume exports"),
        ("heartbeat", cmd_handoff_heartbeat, "record liveness on an accepted assignment"),
    ):
        p = _command(handoff, name, func, help_text, common)
        p.add_argument("--actor-id")
        if name == "accept":
            p.add_argument("--claim-id", help="optional worker claim")
        p.add_argument("handoff_id", metavar="HANDOFF_ID")
    p = _command(handoff, "return", cmd_handoff_return, "return result evidence (fail-closed)", common)
    p.add_argument("--outcome", required=True, metavar="succeeded|failed")
    p.add_argument("--result-fact-id", required=True)
    p.add_argument("--actor-id")
    p.add_argument("handoff_id", metavar="HANDOFF_ID")
    p = _command(handoff, "board", cmd_handoff_board, "derived lanes with next actions", common)
    p.add_argument("--actor-id", help="only assignments this actor sent or received")
    p.add_argument("--mine", action="store_true", help="filter by $AIDEMEMO_ACTOR_ID")
    p.add_argument("--source-id")
    p.add_argument("--include-completed", action="store_true")
    p.add_argument("--stale-after", metavar="DURATION", help="idle time before attention, e.g. 90s, 15m (default 1h)")
    p.add_argument("-l", "--limit", type=int, default=50)
    p = _command(handoff, "run", cmd_handoff_run, "accept the oldest pending assignment and run the agent", common)
    p.add_argument("alias", metavar="ALIAS")
    p.add_argument("handoff_id", nargs="?", metavar="HANDOFF_ID")
    p.set_defaults(trailing="handoff_id")
    p.add_argument("--next", action="store_true")
    p.add_argument("--workspace")
    p.add_argument("--timeout", type=float, default=rules.DEFAULT_RUN_TIMEOUT_S, metavar="SECONDS")
    p.add_argument("--heartbeat-interval", type=float, default=rules.DEFAULT_HEARTBEAT_INTERVAL_S, metavar="SECONDS")


_GROUPS = ("session", "fact", "agent", "config", "handoff")


def _group_of(argv: list[str]) -> str | None:
    """The command group named in ``argv``, skipping global options (and their values)."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in ("--store", "--now-ms"):
            skip = True
        elif not token.startswith("-"):
            return token if token in _GROUPS else None
    return None


def _build_parser(only: str | None = None) -> _Parser:
    """The parser; with ``only``, the other groups get no commands (building them all costs
    several milliseconds on every call, and agents call this command many times)."""
    common = _Parser(add_help=False)
    # Accepted before or after the command words; SUPPRESS keeps the global value otherwise.
    common.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS, help="embedded store file")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON output")

    parser = _Parser(prog=PROGRAM, description="Token-free local handoff on an embedded SQLite store.")
    parser.add_argument("--store", metavar="PATH", help="store file (default $AIDEMEMO_STORE or ~/.aidememo/local.sqlite)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--now-ms", type=int, help=argparse.SUPPRESS)  # test clock; see docs/local.md
    groups = parser.add_subparsers(dest="group", metavar="GROUP", required=True, parser_class=_Parser)

    adders = {"session": _add_session, "fact": _add_fact, "agent": _add_agent, "config": _add_config,
              "handoff": _add_handoff}
    for group, add in adders.items():
        if only is None or only == group:
            add(groups, common)
        else:  # listed in the usage, commands left out: this call does not use them
            groups.add_parser(group)
    return parser


def _place_trailing(args: argparse.Namespace, extras: list[str]) -> None:
    """Give a late optional positional its value.

    argparse binds an optional positional that follows a required one (``send ALIAS [SESSION]``)
    in the same chunk as the required one, so ``send ALIAS --from A SESSION`` would leave SESSION
    over; it is placed here instead.
    """
    if not extras:
        return
    slot = getattr(args, "trailing", None)
    if slot is None or getattr(args, slot) is not None or len(extras) != 1 or extras[0].startswith("-"):
        raise UsageError(f"{PROGRAM}: unrecognized arguments: {' '.join(extras)}")
    setattr(args, slot, extras[0])


def _store_path(flag: str | None, env: Mapping[str, str]) -> tuple[str, str]:
    if flag is not None and flag.strip():
        path = os.path.abspath(os.path.expanduser(flag))
        args = f" --store {shell_quote(path)}"
    else:
        path = os.path.expanduser(env.get("AIDEMEMO_STORE", "").strip() or _DEFAULT_STORE)
        args = ""
    if os.path.isdir(path):
        raise invalid_input(f"store {path} is a directory; pass a file path")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise invalid_input(f"cannot create store directory {parent}: {exc.strerror}") from exc
    return path, args


def main(argv: list[str]) -> int:
    """Run one local command; ``argv`` is everything after the program name."""
    as_json = "--json" in argv
    env = os.environ
    try:
        parser = _build_parser(_group_of(argv))
        args, extras = parser.parse_known_args(argv)
        _place_trailing(args, extras)
        as_json = bool(args.json)
        path, store_args = _store_path(args.store, env)
        fixed = args.now_ms if args.now_ms is not None else _test_clock(env)
        now_ms = fixed if fixed is not None else time.time_ns() // 1_000_000
        ctx = Context(
            store_path=path,
            store_args=store_args,
            as_json=as_json,
            now_ms=now_ms,
            clock=(lambda: fixed) if fixed is not None else (lambda: time.time_ns() // 1_000_000),
            env=env,
            out=lambda text: print(text, flush=True),
            err=lambda text: print(text, file=sys.stderr, flush=True),
        )
        return int(args.func(args, ctx))
    except UsageError as exc:
        _fail(as_json, "usage", str(exc))
        return 2
    except LocalError as exc:
        _fail(as_json, str(exc.code), str(exc))
        return 1
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the exit flush from failing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except UnicodeEncodeError:
        # Undecodable bytes in an argument or variable arrive as surrogates and cannot be stored.
        _fail(as_json, str(LocalErrorCode.INVALID_INPUT), "invalid input: arguments and variables must be valid UTF-8")
        return 1
    except sqlite3.Error as exc:
        _fail(as_json, str(LocalErrorCode.STORAGE_FAILURE), f"storage failure: {exc}")
        return 1
    except OSError as exc:
        _fail(as_json, "os_error", f"{exc.filename or 'system'}: {exc.strerror or exc}")
        return 1
    except KeyboardInterrupt:
        _fail(as_json, "interrupted", "interrupted")
        return 130


def _fail(as_json: bool, code: str, message: str) -> None:
    if as_json:
        print(json.dumps({"error": {"code": code, "message": message}}), file=sys.stderr)
    else:
        print(f"Error: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
