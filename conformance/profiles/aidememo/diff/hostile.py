"""Hostile bodies drawn from the OpenAPI document: each write route's request schema, bent one field at a time.

The document is the reference's own (``aidememo_ref/openapi.json``, served as ``GET /openapi.json``).
For a body the generator made, one field the schema names (top level or ``payload``) gets a value
the schema refuses, or one at its edge: another JSON type, a string at and one past its length
limit (the ``maxLength`` of ids, the "1 to N bytes" of texts, in ASCII and in two-byte letters),
an empty or blank string, a pattern it breaks, an integer at and past its bounds, a value outside
its enum; or the object gains an unknown field or loses a required one.
"""

from __future__ import annotations

import functools
import json
import random
import re
from importlib.resources import files
from typing import Any

__all__ = ["bend"]

_BYTES = re.compile(r"1 to (\d+) bytes")
_OTHER_TYPES: tuple[Any, ...] = (12, 1.5, True, None, [], {}, "7")


@functools.cache
def _document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(files("aidememo_ref").joinpath("openapi.json").read_text("utf-8"))
    return loaded


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    node: Any = _document()
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return _resolve(node)


def _request_schema(path: str) -> dict[str, Any] | None:
    """The request schema of the POST route whose template matches ``path`` (``$project`` filled in or not)."""
    for template, operations in _document()["paths"].items():
        pattern = "^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]*", re.escape(template)) + "$"
        if re.match(pattern, path.replace("$project", "p")) and "post" in operations:
            schema = operations["post"].get("requestBody", {}).get("content", {}).get("application/json", {})
            return _resolve(schema["schema"]) if "schema" in schema else None
    return None


def _wrong_types(schema: dict[str, Any]) -> list[tuple[Any, str]]:
    """Values of a JSON type ``schema`` does not allow (none when it allows any)."""
    options = [_resolve(s) for s in schema.get("anyOf", [])] or [schema]
    kinds = {option.get("type") for option in options}
    if None in kinds:
        return []
    return [(value, f"of type {_json_type(value)}") for value in _OTHER_TYPES if _json_type(value) not in kinds]


def _edges(schema: dict[str, Any]) -> list[tuple[Any, str]]:
    """Values at and past ``schema``'s edges, each with what it tries."""
    out: list[tuple[Any, str]] = []
    for option in [_resolve(s) for s in schema.get("anyOf", [])] or [schema]:
        if option.get("type") == "string":
            limit = option.get("maxLength")
            said = _BYTES.search(str(option.get("description", "")))
            limit = int(said.group(1)) if said else limit
            if isinstance(limit, int):
                out += [("a" * limit, f"{limit} bytes (the limit)"), ("a" * (limit + 1), f"{limit + 1} bytes"),
                        ("é" * (limit // 2) + "a", f"{limit + 1} bytes in two-byte letters")]
            out += [("", "empty"), ("   ", "blank")]
            if "pattern" in option:
                out.append(("bad id/é", "outside the pattern"))
            if "enum" in option:
                out += [(str(option["enum"][0]).upper(), "an enum value in capitals"), ("other", "outside the enum")]
        elif option.get("type") == "integer":
            low, high = option.get("minimum"), option.get("maximum")
            if isinstance(low, int):
                out += [(low, "the minimum"), (low - 1, "below the minimum")]
            if isinstance(high, int):
                out += [(high, "the maximum"), (high + 1, "past the maximum")]
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def bend(rng: random.Random, path: str, body: Any) -> tuple[Any, str] | None:
    """``body`` (a copy) with one thing the route's schema refuses or sits at its edge; what was bent.

    None: the document has no request schema for ``path`` or the body is no object.
    """
    schema = _request_schema(path)
    if schema is None or not isinstance(body, dict):
        return None
    bent = json.loads(json.dumps(body))
    holder, where, props = bent, "", schema.get("properties", {})
    payload_schema = _resolve(props.get("payload", {}))
    if isinstance(bent.get("payload"), dict) and payload_schema.get("properties") and rng.random() < 0.6:
        holder, where, schema = bent["payload"], "payload.", payload_schema
        props = schema["properties"]
    roll = rng.random()
    if roll < 0.1:
        holder[rng.choice(["unexpected", "actor_id", "tenant_id", "Command_Id"])] = "x"
        return bent, f"schema: unknown field in {where.rstrip('.') or 'the body'}"
    required = [name for name in schema.get("required", []) if name in holder]
    if roll < 0.2 and required:
        name = rng.choice(required)
        del holder[name]
        return bent, f"schema: {where}{name} missing"
    name = rng.choice(sorted(props))
    field_schema = _resolve(props[name])
    edges, wrong = _edges(field_schema), _wrong_types(field_schema)
    pool = edges if edges and (not wrong or rng.random() < 0.6) else wrong
    if not pool:
        return None
    value, what = rng.choice(pool)
    holder[name] = value
    return bent, f"schema: {where}{name} {what}"
