"""The capture hot path: the shortcuts ``POST /v1/remember`` takes, each standing for general code.

Why this module exists (issue 24): a capture is the request the published clients send most, and
``bench/xmemo.py`` holds it against a raw one-row SQLite transaction; the general path spends most
of a capture in small Python steps. Every speed trick of the XMemo reference lives here, and each
one is a shortcut of a function elsewhere that stays the single statement of the rule; the one
the layers keep out (``_writes._new``, below this module, builds a capture's ``Memory`` with
``tuple.__new__``: without it a capture's CPU rose in ``bench/xmemo.py``) points here:

* ``plain_remember`` decodes the common ``remember`` body (plain strings within their bounds, the
  numbers, flag and metadata object the published clients add, no idempotency key, provenance or
  expiry) in one pass, for ``_decode.decode_remember``. Anything it is not sure of returns None and
  the general decoder runs, so every refusal is worded there. The clients' mix in
  ``bench/xmemo.py`` (Hermes' ``importance`` and ``dedupe``, OpenClaw's and the Agent Framework's
  ``metadata``) is what it covers beyond the single body.
* ``plain_json`` parses a body that is one JSON object and nothing after it with the scanner
  ``json.loads`` runs, without its wrappers, for ``_decode.parse_body``; any other body, and any
  the scanner refuses, goes to ``parse_body``, so every refusal is worded there.
* ``answer_text`` reuses the part of a write's answer that only the memory's shape decides (the
  fields between its path and its metadata, but its semantic key), for ``_codec.answer_text``,
  which writes it; the metadata, canonical JSON already, and the semantic key are written as they
  are, so a capture whose metadata or semantic key is its own (the Agent Framework's carry its
  idempotency key and a digest of the content) still reuses the rest.
* ``plain_remember`` writes the metadata object with the C encoder made once, as
  ``_codec.canonical_json`` makes it on every call (``json.JSONEncoder.encode``), for a body
  ``json.loads`` parsed (never circular).

* ``cached_caller`` keeps, per service, the caller ``_attribute`` resolved for a principal object
  and the two agent headers as sent (a frozen ``Caller`` and the installation id's SHA-256 were
  made again for every request), for ``XMemoService._caller``; a header it refuses is never kept.
* Known keys: ``XMemoService._principal`` takes an ``X-API-Key`` sent without ``Authorization``
  as it is when the service already holds its digest, which only a key ``credential`` passed (and
  so one with nothing to strip) gets; any other request's credential is checked in full.
* A capture's records are read by position where it reads many fields (``answer_text`` here,
  ``_writes._new``, ``_state.TenantMemories._lookups``): on Python 3.11 a NamedTuple field read by
  name is a generic attribute lookup, about 150 instructions, which the interpreter does not
  specialise; one unpacking or slice reads them all.

What these cost and save is counted with cachegrind on ``bench/xmemo.py``'s bodies
(``python bench/xmemo.py --instructions``): instructions per capture, which no other work on the
machine moves.
``tests/xmemo/test_hot_path.py`` holds each shortcut equal to the code it stands for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from ._codec import answer_text as general_answer_text
from ._codec import iso, number_text
from ._decode import STORED_TYPES as _STORED_TYPES
from ._decode import WRITE_BUCKET, parse_body
from ._http import AGENT_HEADER, INSTANCE_HEADER, HttpRequest
from ._records import Caller, Memory, Principal
from ._writes import DEFAULT_STATUS, Remember

__all__ = ["plain_remember", "plain_json", "answer_text", "Callers", "cached_caller"]

# The remember fields the one-pass decoder checks itself; a body with any other goes to the schema.
_PLAIN_FIELDS: Final = frozenset({"content", "path", "scope", "bucket", "team_id", "source", "semantic_key",
                                  "memory_type", "importance", "confidence", "dedupe", "metadata"})
_CACHED: Final = 1_024  # answer middles kept, one per memory shape seen; cleared when full
_string: Final = json.encoder.encode_basestring  # as _codec escapes strings
_tuple_new: Final = tuple.__new__
# json.loads' own scanner (the C one), with its defaults; typeshed does not declare the attribute.
_scan: Final[Callable[[str, int], tuple[object, int]]] = getattr(json.JSONDecoder(), "scan_once")
# ``_codec.canonical_json``'s encoder (sorted keys, raw UTF-8, compact, NaN allowed), made once; no
# circular check, for values json.loads made. typeshed does not declare c_make_encoder.
_sorted: Final[Callable[[object, int], list[str]]] = getattr(json.encoder, "c_make_encoder")(
    None, None, _string, None, ":", ",", True, False, True)


def plain_remember(body: object) -> Remember | None:
    """``decode_remember(body)`` for a body every field of which is plainly valid, else None."""
    if type(body) is not dict or not _PLAIN_FIELDS.issuperset(body):
        return None
    get = body.get
    content, path, scope, bucket = get("content"), get("path"), get("scope"), get("bucket", WRITE_BUCKET)
    team_id, source, semantic_key, memory_type = get("team_id"), get("source"), get("semantic_key"), get("memory_type")
    importance, confidence, dedupe, metadata = get("importance"), get("confidence"), get("dedupe"), get("metadata")
    # Each test written out, not called: seven helper calls cost a capture about 3,000 instructions.
    # Labels: None or 1 to N characters; scope and bucket also free of wildcards; numbers plainly
    # within [0, 1] (not a bool, which JSON Schema's number is not; not NaN); content not blank
    # (``isspace`` is ``strip``'s test, without the copy).
    if not (type(content) is str and 0 < len(content) <= 65_536 and type(path) is str and 0 < len(path) <= 512
            and (scope is None or type(scope) is str and 0 < len(scope) <= 256 and "%" not in scope
                 and "*" not in scope)
            and type(bucket) is str and 0 < len(bucket) <= 128 and "%" not in bucket and "*" not in bucket
            and (team_id is None or type(team_id) is str and 0 < len(team_id) <= 128)
            and (source is None or type(source) is str and 0 < len(source) <= 128)
            and (semantic_key is None or type(semantic_key) is str and 0 < len(semantic_key) <= 512)
            and (memory_type is None and "memory_type" not in body
                 or type(memory_type) is str and memory_type in _STORED_TYPES)
            and (importance is None or (type(importance) is float or type(importance) is int) and 0 <= importance <= 1)
            and (confidence is None or (type(confidence) is float or type(confidence) is int) and 0 <= confidence <= 1)
            and (dedupe is None or type(dedupe) is bool) and (metadata is None or type(metadata) is dict)
            and not content.isspace()):
        return None
    # decode_remember's record for these fields, the others at what their absence gives.
    # (Positionally, in Remember's field order: ``python bench/records.py`` times it against the keyword call.)
    return _tuple_new(Remember, (content, path, bucket, scope, team_id, _STORED_TYPES[memory_type or "auto"],
                                 DEFAULT_STATUS, importance, confidence, semantic_key, dedupe is True, source,
                                 "".join(_sorted(metadata, 0)) if metadata else "{}", None, None))


def plain_json(raw: bytes) -> object:
    """``parse_body(raw)``, scanned directly when ``raw`` is one JSON object and nothing after it."""
    if raw[:1] == b"{" and raw[-1:] == b"}" and raw[1:2] != b"\x00":  # parse_body's UTF-8 case
        try:
            text = raw.decode("utf-8", "surrogatepass")
            value, end = _scan(text, 0)
        except (ValueError, StopIteration):  # UnicodeDecodeError is a ValueError
            return parse_body(raw)
        if end == len(text):
            return value
    return parse_body(raw)


def _remember(cache: dict[Any, Any], key: object, value: object) -> None:
    if len(cache) >= _CACHED:
        cache.clear()
    cache[key] = value


# A service's callers as its REST routes resolved them: by the principal object's id and the two
# agent headers as sent, with the principal itself (an id is only reused once its object is gone,
# and the entry keeps it alive) and the caller.
Callers: TypeAlias = dict[tuple[int, str | None, str | None], tuple[Principal, Caller]]


def cached_caller(cache: Callers, principal: Principal, request: HttpRequest,
                  attribute: Callable[[Principal, HttpRequest, None, None], Caller]) -> Caller:
    """``attribute(principal, request, None, None)``, kept for the same principal and agent headers."""
    headers = request.headers
    key = (id(principal), headers.get(AGENT_HEADER), headers.get(INSTANCE_HEADER))
    kept = cache.get(key)
    if kept is not None and kept[0] is principal:
        return kept[1]
    caller = attribute(principal, request, None, None)  # raises for headers it refuses: never kept
    _remember(cache, key, (principal, caller))
    return caller


# A memory's fields from bucket to agent_trust but its semantic key, by their values: what its
# answer shows between path and metadata, as the text before the semantic key's value and after it.
# The key is left out because the clients that send one send a new one with almost every capture
# (the Agent Framework's is a digest of the content), which would make every such shape new.
_middles: dict[tuple[object, ...], tuple[str, str]] = {}
_KEY_FIELD: Final = ',"idempotency_key":'
_SEMANTIC_FIELD: Final = '"semantic_key":'
_STATE_FIELD: Final = ',"state_key":'


def answer_text(memory: Memory, outcome: str, idempotency_key: str | None) -> str:
    """``_codec.answer_text(memory, outcome, idempotency_key)``, its middle reused for the same
    values (the numbers by their text: ``1`` and ``1.0``, ``0.0`` and ``-0.0`` are equal keys)."""
    # The fields unpacked at once: on Python 3.11 each NamedTuple field read by name is a generic
    # attribute lookup (its descriptor is not one the interpreter specialises), about 150
    # instructions each, and the answer reads 26.
    (memory_id, _, kind, content, path, bucket, scope, team_id, memory_type, status, importance, confidence,
     semantic_key, state_key, event_type, session_id, source, agent_id, instance, trust, metadata, version,
     created_ms, updated_ms, expires_ms) = memory
    shape = (bucket, scope, team_id, memory_type, status, "null" if importance is None else number_text(importance),
             "null" if confidence is None else number_text(confidence), state_key, event_type, session_id, source,
             agent_id, instance, trust)
    mid = _string(memory_id)
    head = f'{{"id":{mid},"memory_id":{mid},"kind":{_string(kind)},"content":{_string(content)},' \
           f'"path":{_string(path)},'
    semantic = "null" if semantic_key is None else _string(semantic_key)
    expires = "null" if expires_ms is None else f'"{iso(expires_ms)}"'
    key = "" if idempotency_key is None else _KEY_FIELD + _string(idempotency_key)
    created = iso(created_ms)
    updated = created if updated_ms == created_ms else iso(updated_ms)  # one stamp for a new memory
    tail = f'"metadata":{metadata},"version":{version},"created_at":"{created}",' \
           f'"updated_at":"{updated}","expires_at":{expires},"write":{_string(outcome)}{key}}}'
    middle = _middles.get(shape)
    if middle is None:
        text = general_answer_text(memory, outcome, idempotency_key)
        if text.startswith(head) and text.endswith(tail):  # the format's frame, as the general one writes it
            inner = text[len(head):len(text) - len(tail)]
            before, found, after = inner.partition(_SEMANTIC_FIELD)
            after = after.removeprefix(semantic)
            if found and after.startswith(_STATE_FIELD) and f"{before}{found}{semantic}{after}" == inner:
                _remember(_middles, shape, (before + found, after))
        return text
    return f"{head}{middle[0]}{semantic}{middle[1]}{tail}"
