"""A memory as JSON: the object every write answers and every read shows, and back.

The store's log keeps each capture's answer as its row (``_sqlite``), and memory is rebuilt from
those rows, so ``memory_from_json(memory_json(m))`` must give ``m`` back exactly: timestamps are
written as RFC 3339 UTC with milliseconds and read back to the same millisecond, metadata is kept
in its canonical text, and ``importance``/``confidence`` are floats (as the REAL columns of
table layout 1 gave them back).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Final

from ._records import Kind, Memory, MemoryType, Tenant, Trust

__all__ = ["iso", "parse_iso_ms", "memory_json", "memory_from_json", "answer_text", "canonical_json", "number_text", "real",
           "compact_json"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS: Final = timedelta(milliseconds=1)
_KINDS: Final = {k.value: k for k in Kind}
_TYPES: Final = {t.value: t for t in MemoryType}
_TRUSTS: Final = {t.value: t for t in Trust}


@lru_cache(maxsize=4_096)
def _second(seconds: int) -> str:
    # Memoised: a second's prefix is shared by every timestamp written in it.
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")


# A millisecond's three digits, written once: a ``:03d`` format costs more than the rest of a stamp.
_MILLIS: Final = tuple(f"{n:03d}" for n in range(1000))


def _stamp(ms: int) -> str:
    return f"{_second(ms // 1000)}{_MILLIS[ms % 1000]}Z"  # nothing in it needs escaping in JSON


def iso(ms: int | None) -> str | None:
    """Unix milliseconds as RFC 3339 UTC with milliseconds (``2026-01-01T00:00:00.000Z``)."""
    return None if ms is None else _stamp(ms)


def parse_iso_ms(text: str) -> int:
    """The milliseconds ``iso`` wrote ``text`` for (its year may have fewer than four digits)."""
    date, _, clock = text.removesuffix("Z").partition("T")
    year, month, day = date.split("-")
    hms, _, millis = clock.partition(".")
    hour, minute, second = hms.split(":")
    stamp = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=timezone.utc)
    return (stamp - _EPOCH) // _MS + int(millis)


# Stored metadata text (sorted keys, no spaces, non-ASCII kept) and answers (compact), with encoders
# built once: json.dumps with any non-default option builds one per call.
canonical_json: Final = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
compact_json: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_string: Final = json.encoder.encode_basestring  # json's own string escaping (its C version), non-ASCII kept


def real(value: float | None) -> float | None:
    """A 0-1 field as stored: a float (``1`` reads back as ``1.0``)."""
    return None if value is None else float(value)


def memory_json(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "memory_id": memory.id,
        "kind": memory.kind.value,
        "content": memory.content,
        "path": memory.path,
        "bucket": memory.bucket,
        "scope": memory.scope,
        "team_id": memory.team_id,
        "memory_type": memory.memory_type.value,
        "status": memory.status,
        "importance": memory.importance,
        "confidence": memory.confidence,
        "semantic_key": memory.semantic_key,
        "state_key": memory.state_key,
        "event_type": memory.event_type,
        "session_id": memory.session_id,
        "source": memory.source,
        "agent_id": memory.agent_id,
        "agent_instance_id_hash": memory.agent_instance_id_hash,
        "agent_trust": memory.agent_trust.value,
        "metadata": json.loads(memory.metadata_json),
        "version": memory.version,
        "created_at": iso(memory.created_at_ms),
        "updated_at": iso(memory.updated_at_ms),
        "expires_at": iso(memory.expires_at_ms),
    }


def memory_from_json(tenant: Tenant, value: dict[str, Any]) -> Memory:
    """The memory ``memory_json`` showed (extra fields, such as a write's ``write``, are ignored).

    Raises ValueError (KeyError, TypeError) for an object that is not one."""
    expires = value["expires_at"]
    return Memory(
        id=value["id"], tenant=tenant, kind=_KINDS[value["kind"]], content=value["content"], path=value["path"],
        bucket=value["bucket"], scope=value["scope"], team_id=value["team_id"],
        memory_type=_TYPES[value["memory_type"]], status=value["status"], importance=real(value["importance"]),
        confidence=real(value["confidence"]), semantic_key=value["semantic_key"], state_key=value["state_key"],
        event_type=value["event_type"], session_id=value["session_id"], source=value["source"],
        agent_id=value["agent_id"], agent_instance_id_hash=value["agent_instance_id_hash"],
        agent_trust=_TRUSTS[value["agent_trust"]], metadata_json=canonical_json(value["metadata"]),
        version=value["version"], created_at_ms=parse_iso_ms(value["created_at"]),
        updated_at_ms=parse_iso_ms(value["updated_at"]),
        expires_at_ms=None if expires is None else parse_iso_ms(expires),
    )


_ANSWER: Final = (
    '{"id":%s,"memory_id":%s,"kind":%s,"content":%s,"path":%s,"bucket":%s,"scope":%s,"team_id":%s,'
    '"memory_type":%s,"status":%s,"importance":%s,"confidence":%s,"semantic_key":%s,"state_key":%s,'
    '"event_type":%s,"session_id":%s,"source":%s,"agent_id":%s,"agent_instance_id_hash":%s,"agent_trust":%s,'
    '"metadata":%s,"version":%d,"created_at":"%s","updated_at":"%s","expires_at":%s,"write":%s%s}'
)


def number_text(value: float | None) -> str:
    """A nullable number as the answers write it."""
    if value is None:
        return "null"
    return repr(value) if math.isfinite(value) else compact_json(value)  # as json writes a number


def answer_text(memory: Memory, outcome: str, idempotency_key: str | None) -> str:
    """``compact_json(memory_json(memory) | {"write": outcome, ["idempotency_key": key]})``, in one format.

    Every write answers this text; the metadata is already canonical JSON, which json would write
    back unchanged (``tests/xmemo/test_codec.py`` holds the two equal). Written out field by field,
    without a helper call per field: the enum members are strings already."""
    m, s, second, millis = memory, _string, _second, _MILLIS
    mid, created, updated, expires = s(m.id), m.created_at_ms, m.updated_at_ms, m.expires_at_ms
    return _ANSWER % (
        mid, mid, s(m.kind), s(m.content), s(m.path), s(m.bucket), "null" if m.scope is None else s(m.scope),
        "null" if m.team_id is None else s(m.team_id), s(m.memory_type), s(m.status), number_text(m.importance),
        number_text(m.confidence), "null" if m.semantic_key is None else s(m.semantic_key),
        "null" if m.state_key is None else s(m.state_key), "null" if m.event_type is None else s(m.event_type),
        "null" if m.session_id is None else s(m.session_id), "null" if m.source is None else s(m.source),
        "null" if m.agent_id is None else s(m.agent_id),
        "null" if m.agent_instance_id_hash is None else s(m.agent_instance_id_hash), s(m.agent_trust),
        m.metadata_json, m.version, f"{second(created // 1000)}{millis[created % 1000]}Z",
        f"{second(updated // 1000)}{millis[updated % 1000]}Z",
        "null" if expires is None else f'"{second(expires // 1000)}{millis[expires % 1000]}Z"', s(outcome),
        "" if idempotency_key is None else f',"idempotency_key":{s(idempotency_key)}')
