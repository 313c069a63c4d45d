"""``fact add|get`` (upstream's flags, answers and session hook)."""

from __future__ import annotations

import argparse
from datetime import date, datetime, timezone

from aidememo_cli._local import _memory as memory
from aidememo_cli._local._errors import invalid_input
from aidememo_cli._local._facttypes import parse_fact_type
from aidememo_cli._local._records import Entity

from ._context import Context, Parser, add_command, add_group, clean


def _split(values: list[str]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def parse_date_ms(text: str) -> int:
    """``YYYY-MM-DD`` (UTC midnight) or RFC 3339, as epoch milliseconds."""
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if "T" in value.upper() and moment.tzinfo is not None:
            return int(moment.timestamp() * 1000)
    except ValueError:
        pass
    try:
        day = date.fromisoformat(value) if len(value) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise invalid_input(f"expected YYYY-MM-DD or RFC3339 date, got: {value}")
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)


def _confidence(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"couldn't parse {text!r} as a number") from None


def cmd_add(args: argparse.Namespace, ctx: Context) -> int:
    observed_at = None if args.observed_at is None else parse_date_ms(args.observed_at)
    with ctx.store(write=True) as store:
        # Upstream's `fact add` reads no AIDEMEMO_SOURCE_ID (docs/local.md).
        source_id = ctx.source(args.source_id, store, env=False)
        session: Entity | None = None
        explicit = clean(args.session_id)
        if explicit is not None:
            session = memory.resolve_session(store, explicit, source_id)
        elif (active := ctx.env.get("AIDEMEMO_SESSION_ID", "")) != "":
            found = store.entity(active)
            # Upstream's hook: attach the active session only where it is visible.
            if found is not None and store.visible(found.entity_id, source_id):
                session = found
        added = memory.add_fact(
            store, content=args.content, fact_type=None if args.type is None else parse_fact_type(args.type),
            entities=_split(args.entities), tags=_split(args.tags), source_id=source_id,
            actor_id=ctx.actor(args.actor_id, store), now_ms=ctx.now_ms, source=args.source, confidence=args.confidence,
            observed_at=observed_at, session=session,
        )
    fact, kind = added.fact, added.write_type
    hint = None if kind.hint is None else {
        "suggested_fact_type": str(kind.hint),
        "message": f"content has a strong {kind.hint} cue; use --type {kind.hint} to activate type-aware ranking",
    }
    data = {
        "id": fact.id, "content": fact.content, "fact_type": str(fact.fact_type), "fact_type_source": kind.source,
        "fact_type_hint": hint, "entity_names": list(fact.entity_names), "created_at": fact.created_at,
        "actor_id": fact.actor_id, "auto_created_entities": added.auto_created, "entity_name_alternatives": None,
        "existing_similar": None,
    }
    text = f"Added fact with ID {fact.id}"
    if kind.source == "inferred":
        text += f"\n  inferred fact_type: {fact.fact_type}"
    if kind.hint is not None:
        text += (f"\n  fact_type hint: content looks like {kind.hint}; pass --type {kind.hint} to activate"
                 " type-aware ranking")
    if added.auto_created:
        label = "entity" if len(added.auto_created) == 1 else "entities"
        text += f"\n  auto-created {label}: {', '.join(added.auto_created)}"
    ctx.emit(data, text)
    return 0


def cmd_get(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        fact = memory.fact_get(store, args.id, clean(args.source_id), bad_id="Invalid fact ID")
    rows = [("ID", fact.id), ("Content", fact.content), ("Type", str(fact.fact_type)),
            ("Entities", ", ".join(fact.entity_names)), ("Tags", ", ".join(fact.tags))]
    if fact.source is not None:
        rows.append(("Source", fact.source))
    rows += [("Confidence", f"{fact.source_confidence:.2f}"), ("Relevance", f"{fact.relevance_score:.2f}"),
             ("Accessed", str(fact.access_count))]
    width = max(len(name) for name, _ in rows)
    ctx.emit(fact.to_json(), "\n".join(f"{name:<{width}}  {value}" for name, value in rows), sort=False)
    return 0


COMMANDS = ('add', 'get')


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    fact = add_group(groups, "fact", "facts")
    p = add_command(fact, "add", cmd_add, "add a fact (attached to the active session where it is visible)")
    p.add_argument("-t", "--type", metavar="TYPE")
    p.add_argument("-e", "--entities", action="append", default=[], metavar="A,B")
    p.add_argument("-g", "--tags", action="append", default=[], metavar="A,B")
    p.add_argument("-s", "--source", metavar="SOURCE", help="source page path (not the store: that is global -s)")
    p.add_argument("--source-id")
    p.add_argument("--actor-id")
    p.add_argument("-c", "--confidence", type=_confidence)
    p.add_argument("--observed-at", metavar="DATE")
    p.add_argument("--session-id", help="attach to this session (kit extension; default $AIDEMEMO_SESSION_ID)")
    p.add_argument("content", metavar="CONTENT")
    p = add_command(fact, "get", cmd_get, "one fact by ID")
    p.add_argument("--source-id")
    p.add_argument("id", metavar="ID")
