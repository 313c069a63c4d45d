"""The read-only Markdown packet and the eval-able resume exports.

The packet is rebuilt from the session's current facts every time (preview, accept, run);
an assignment never stores a copy of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._records import Assignment, Fact, FactType, Session

__all__ = [
    "PROGRAM",
    "DEFAULT_PACKET_LIMIT",
    "Route",
    "shell_quote",
    "export_lines",
    "resume_command",
    "render_packet",
    "as_shell_comment",
]

PROGRAM = "aidememo-ref"
# Upstream keeps the latest 40 facts in a packet (`session handoff --limit 40`).
DEFAULT_PACKET_LIMIT = 40

_SECTIONS: tuple[tuple[str, frozenset[FactType]], ...] = (
    ("Decisions and Constraints", frozenset({FactType.DECISION, FactType.CONVENTION, FactType.PATTERN})),
    ("Open Questions", frozenset({FactType.QUESTION})),
    ("Lessons and Risks", frozenset({FactType.LESSON, FactType.ERROR})),
    ("Supporting Evidence", frozenset({FactType.NOTE})),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """Who hands the session to whom; every field is optional metadata."""

    from_actor: str | None = None
    from_agent: str | None = None
    from_profile: str | None = None
    to_actor: str | None = None
    to_agent: str | None = None
    to_profile: str | None = None


def shell_quote(value: str) -> str:
    """POSIX single quoting; safe inside ``eval``."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def export_lines(env: Mapping[str, str | None]) -> str:
    """``export K='v'`` per variable; ``None`` unsets it so no stale scope leaks into the shell."""
    return "\n".join(
        f"unset {name}" if value is None else f"export {name}={shell_quote(value)}"
        for name, value in env.items()
    )


def resume_command(store_args: str, session_id: str, source_id: str | None) -> str:
    """``eval "$(aidememo-ref [--store 'S'] session resume [--source-id 'X'] 'SESSION')"``."""
    scope = "" if source_id is None else f"--source-id {shell_quote(source_id)} "
    return f'eval "$({PROGRAM}{store_args} session resume {scope}{shell_quote(session_id)})"'


def as_shell_comment(text: str) -> str:
    """Prefix every line with ``#`` so a packet can precede exports in eval-able output."""
    return "\n".join(f"# {line}" if line else "#" for line in text.splitlines())


def _route_line(label: str, actor: str | None, agent: str | None, profile: str | None) -> str | None:
    if actor is None and agent is None and profile is None:
        return None
    extras = [f"agent {agent}"] if agent else []
    extras += [f"profile {profile}"] if profile else []
    tail = f" ({', '.join(extras)})" if extras else ""
    return f"- {label}: {actor or '-'}{tail}"


def _fact_line(fact: Fact) -> str:
    body = "\n  ".join(fact.content.strip().splitlines())
    author = f", by {fact.actor_id}" if fact.actor_id else ""
    return f"- [{fact.fact_type}] {body} (fact `{fact.fact_id}`{author})"


def render_packet(
    *,
    session: Session,
    facts: Sequence[Fact],
    total_facts: int,
    source_id: str | None,
    route: Route,
    focus: str | None,
    done_when: str | None,
    resume: str,
    store_args: str,
    assignment: Assignment | None = None,
) -> str:
    """Render the packet; ``facts`` are the latest ones, oldest first."""
    lines = ["# AideMemo Agent Handoff", "", "## Routing", f"- session: `{session.session_id}`"]
    lines.append(f"- topic: {' '.join(session.topic.split())}")
    lines.append(f"- source_id: `{source_id}`" if source_id is not None else "- source_id: (none)")
    for line in (
        _route_line("from", route.from_actor, route.from_agent, route.from_profile),
        _route_line("to", route.to_actor, route.to_agent, route.to_profile),
    ):
        if line is not None:
            lines.append(line)
    if assignment is not None:
        lines.append(f"- handoff: `{assignment.handoff_id}` [{assignment.status}]")
    lines.append(f"- included_facts: {len(facts)} of {total_facts}")
    lines += [
        "",
        "## Resume Contract",
        "Continue this tracked session. Record decisions, lessons and errors as facts attached",
        "to it, written as the receiving actor, and return one of them as the result.",
        "",
        f"    {resume}",
    ]
    if focus:
        lines += ["", "## Requested Focus", focus.strip()]
    if done_when:
        lines += ["", "## Definition of Done", done_when.strip()]
    for title, kinds in _SECTIONS:
        chosen = [_fact_line(fact) for fact in facts if fact.fact_type in kinds]
        lines += ["", f"## {title}", *(chosen or ["- (none)"])]
    lines += [
        "",
        "## Continuation Commands",
        f"- resume: `{resume}`",
        f"- read a fact: `{PROGRAM}{store_args} fact get <fact_id>`",
    ]
    if assignment is not None:
        lines.append(
            f"- return: `{PROGRAM}{store_args} handoff return --outcome succeeded"
            f" --result-fact-id <fact_id> {assignment.handoff_id}`"
        )
    return "\n".join(lines) + "\n"
