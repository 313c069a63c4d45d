"""Bytes and query strings into typed requests, or a 422 with FastAPI-style detail.

The schemas are data (``_schemas``), compiled once into Python by ``fastjsonschema``; a body it
refuses goes to ``jsonschema``, which words the 422 (or, where the two drafts' rules differ, as
for ``1.0`` as an integer, accepts it: only jsonschema's verdict counts). What a schema cannot say
(blank text, timestamps with an offset, a time window's order, agreeing idempotency keys) is
checked here, after it. Nothing here reads storage or decides a rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Final, cast

import fastjsonschema

from ._codec import canonical_json
from ._errors import RequestError, ValidationItem
from ._records import MemoryType
from ._schemas import MEMORY_TYPES, REST
from ._store import ReadFilter
from ._writes import DEFAULT_STATUS, RecordEvent, Remember, UpdateState, compose_state

__all__ = [
    "RecallRequest",
    "SearchRequest",
    "ProjectContextRequest",
    "parse_body",
    "decode_remember",
    "decode_update_state",
    "decode_event",
    "decode_recall",
    "decode_project_context",
    "decode_search",
    "canonical_metadata",
    "idempotency_key",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_TOKENS",
    "WRITE_BUCKET",
    "STORED_TYPES",
]

DEFAULT_MAX_ITEMS: Final = 8  # OC, DS and MAF default
DEFAULT_MAX_TOKENS: Final = 1_200  # DS default; the seed's example asks for 1200
DEFAULT_PROJECT_MAX_TOKENS: Final = 2_000  # MAF's default budget for the project route
DEFAULT_SEARCH_LIMIT: Final = 10  # Hermes' default
MAX_SEARCH_LIMIT: Final = 100
DEFAULT_TTL_SECONDS: Final = 86_400  # Hermes' default state TTL
WRITE_BUCKET: Final = "work"  # the published clients' default write bucket
# The reference does not classify: an ``auto`` write is stored as semantic.
STORED_TYPES: Final = {"auto": MemoryType.SEMANTIC} | {t.value: t for t in MemoryType}


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallRequest:
    query: str
    max_items: int
    max_tokens: int
    prefer_working: bool
    filters: ReadFilter


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    query: str  # "*" lists everything in rank order
    limit: int
    threshold: float | None
    prefer_working: bool
    explain: bool
    filters: ReadFilter


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectContextRequest:
    team_id: str | None
    max_items: int
    max_tokens: int
    durable_query: str


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(REST[name])


@cache
def _compiled(name: str) -> Callable[[object], object]:
    return cast(Callable[[object], object], fastjsonschema.compile(REST[name], use_default=False))


def _problems(name: str, body: object) -> list[ValidationItem]:
    items: list[ValidationItem] = []
    missing: set[str] = set()
    for error in sorted(_validator(name).iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path]):
        loc: list[str | int] = ["body", *error.absolute_path]
        if error.validator == "required" and isinstance(body, dict):
            for field in error.validator_value:
                if field not in body and field not in missing:
                    missing.add(field)
                    items.append(ValidationItem(loc=[*loc, field], msg="Field required", type="missing"))
            continue
        items.append(ValidationItem(loc=loc, msg=error.message, type=str(error.validator)))
    return items


def _check(name: str, body: object) -> dict[str, Any]:
    try:
        _compiled(name)(body)
    except fastjsonschema.JsonSchemaException:
        problems = _problems(name, body)
        if problems:
            raise RequestError.invalid(problems) from None
    assert isinstance(body, dict)
    return body


def parse_body(raw: bytes) -> object:
    """The JSON body, or 422 ``json_invalid`` (an empty body is an empty object's absence: 422 too)."""
    try:
        if raw[:1] == b"{" and raw[1:2] not in (b"", b"\x00"):
            # What json.loads would detect for these bytes (no BOM, no UTF-16/32 zero byte), decoded
            # without its detection pass: the same text, the same errors.
            return json.loads(raw.decode("utf-8", "surrogatepass"))
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError.invalid_field(("body",), f"JSON decode error: {exc}", "json_invalid") from None


def _blank(body: dict[str, Any], field: str) -> None:
    value = body.get(field)
    if isinstance(value, str) and not value.strip():
        raise RequestError.invalid_field(("body", field), "must not be blank")


def _stamp_ms(body: dict[str, Any], field: str, where: str = "body") -> int | None:
    value = body.get(field)
    if value is None:
        return None
    try:
        stamp = datetime.fromisoformat(str(value))
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        raise RequestError.invalid_field((where, field), "must be an RFC 3339 timestamp with an offset")
    return int(stamp.timestamp() * 1000)


def canonical_metadata(value: object, provenance: object = None) -> str:
    """Stored metadata: the client's object (``provenance``, when sent, folded in under that name)."""
    if not value and provenance is None:
        return "{}"  # what the encoder writes for it, without building the encoder's state
    metadata = dict(value) if isinstance(value, dict) else {}
    if isinstance(provenance, dict):
        metadata["provenance"] = provenance
    return canonical_json(metadata)


def idempotency_key(headers: dict[str, str], body: object) -> str | None:
    """The key sent as ``Idempotency-Key``, ``X-Idempotency-Key`` and/or body ``idempotency_key``.

    Hermes sends all three at once; any one is honoured, and two that disagree are refused.
    """
    found = {
        name: value for name, value in (
            ("Idempotency-Key", headers.get("idempotency-key")),
            ("X-Idempotency-Key", headers.get("x-idempotency-key")),
            ("idempotency_key", body.get("idempotency_key") if isinstance(body, dict) else None),
        ) if value is not None
    }
    if any(not isinstance(value, str) for value in found.values()):
        raise RequestError.invalid_field(("body", "idempotency_key"), "Input should be a valid string", "string_type")
    values = set(found.values())
    if len(values) > 1:
        raise RequestError.invalid_field(("header", "Idempotency-Key"), "idempotency keys sent in headers and body differ")
    if not values:
        return None
    (key,) = values
    if not isinstance(key, str) or not 1 <= len(key) <= 255:
        raise RequestError.invalid_field(("header", "Idempotency-Key"), "must be 1 to 255 characters")
    return key


def decode_remember(body: object) -> Remember:
    data = _check("remember", body)
    _blank(data, "content")
    requested = data.get("memory_type") or "auto"
    return Remember(
        content=data["content"], path=data["path"], bucket=data.get("bucket") or WRITE_BUCKET,
        scope=data.get("scope"), team_id=data.get("team_id"),
        memory_type=STORED_TYPES[requested],
        status=data.get("status") or DEFAULT_STATUS, importance=data.get("importance"),
        confidence=data.get("confidence"), semantic_key=data.get("semantic_key"), dedupe=bool(data.get("dedupe")),
        source=data.get("source"), metadata_json=canonical_metadata(data.get("metadata"), data.get("provenance")),
        expires_at_ms=_stamp_ms(data, "expires_at"), memory_id=None,
    )


def decode_update_state(body: object) -> UpdateState:
    data = _check("update_state", body)
    fields = {name: data.get(name) or "" for name in ("content", "current_task", "next_action", "blocked_reason")}
    if not any(value.strip() for value in fields.values()):
        raise RequestError.invalid_field(("body", "content"),
                                         "state needs content, current_task, next_action or blocked_reason")
    metadata = dict(data.get("metadata") or {})
    metadata.update({name: fields[name] for name in ("current_task", "next_action", "blocked_reason") if fields[name]})
    ttl = data.get("ttl_seconds")
    return UpdateState(
        state_key=data.get("state_key") or "active_task", content=compose_state(**fields),
        bucket=data.get("bucket") or WRITE_BUCKET, scope=data.get("scope"), team_id=data.get("team_id"),
        ttl_seconds=DEFAULT_TTL_SECONDS if ttl is None else ttl, source=data.get("source"),
        metadata_json=canonical_metadata(metadata),
    )


def decode_event(body: object) -> RecordEvent:
    data = _check("timeline_event", body)
    _blank(data, "content")
    event_type = data.get("event_type") or "event"
    return RecordEvent(
        content=data["content"], event_type=event_type, occurred_at_ms=_stamp_ms(data, "occurred_at"),
        session_id=data.get("session_id"), path=data.get("path") or f"timeline/{event_type}",
        bucket=data.get("bucket") or WRITE_BUCKET, scope=data.get("scope"), team_id=data.get("team_id"),
        importance=data.get("importance"), confidence=data.get("confidence"), source=data.get("source"),
        metadata_json=canonical_metadata(data.get("metadata")),
    )


def _filters(data: dict[str, Any], where: str = "body") -> ReadFilter:
    def wild(value: object) -> str | None:
        return None if value in (None, "", "%", "*") else str(value)

    memory_type = data.get("memory_type")
    since, until = _stamp_ms(data, "since", where), _stamp_ms(data, "until", where)
    if since is not None and until is not None and until <= since:
        raise RequestError.invalid_field((where, "until"), "until must be later than since")
    return ReadFilter(
        scope=wild(data.get("scope")), bucket=wild(data.get("bucket")), team_id=wild(data.get("team_id")),
        path=wild(data.get("path")),
        memory_type=None if memory_type in (None, "auto", "%") else MemoryType(memory_type),
        since_ms=since, until_ms=until,
    )


def decode_recall(body: object) -> RecallRequest:
    data = _check("recall_context", body)
    _blank(data, "query")
    prefer = data.get("prefer_working")
    return RecallRequest(
        query=data["query"], max_items=data.get("max_items") or DEFAULT_MAX_ITEMS,
        max_tokens=data.get("max_tokens") or DEFAULT_MAX_TOKENS,
        prefer_working=True if prefer is None else prefer, filters=_filters(data),
    )


def decode_project_context(body: object) -> ProjectContextRequest:
    data = _check("project_context", body)
    return ProjectContextRequest(
        team_id=data.get("team_id"), max_items=data.get("max_items") or DEFAULT_MAX_ITEMS,
        max_tokens=data.get("max_tokens") or DEFAULT_PROJECT_MAX_TOKENS, durable_query=data.get("durable_query") or "",
    )


_TRUE: Final = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def decode_search(params: dict[str, str]) -> SearchRequest:
    """Query-string search (``GET /v1/memories/search``): strings in, typed values out."""
    def flag(name: str) -> bool:
        value = params.get(name)
        if value is None:
            return False
        if value.lower() not in _TRUE:
            raise RequestError.invalid_field(("query", name), "Input should be a valid boolean", "bool_parsing")
        return _TRUE[value.lower()]

    query = params.get("query", params.get("q"))
    if query is None or not query.strip():
        raise RequestError.invalid_field(("query", "query"), "Field required", "missing")
    limit_text = params.get("limit")
    try:
        limit = DEFAULT_SEARCH_LIMIT if limit_text is None else int(limit_text)
    except ValueError:
        raise RequestError.invalid_field(("query", "limit"), "Input should be a valid integer", "int_parsing") from None
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise RequestError.invalid_field(("query", "limit"), f"Input should be between 1 and {MAX_SEARCH_LIMIT}")
    threshold_text = params.get("threshold")
    try:
        threshold = None if threshold_text is None else float(threshold_text)
    except ValueError:
        raise RequestError.invalid_field(("query", "threshold"), "Input should be a valid number", "float_parsing") from None
    memory_type = params.get("memory_type")
    if memory_type is not None and memory_type not in (*MEMORY_TYPES, "%"):
        raise RequestError.invalid_field(("query", "memory_type"), "Input should be a memory type, auto or %")
    return SearchRequest(query=query, limit=limit, threshold=threshold, prefer_working=flag("prefer_working"),
                         explain=flag("explain"), filters=_filters(dict(params), "query"))
