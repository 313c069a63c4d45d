"""The reference's OpenAPI document as a test oracle: route matching and a small schema validator.

``jsonschema`` is not a dependency, so this validates the subset of JSON Schema the document
uses (type, const, enum, properties, required, additionalProperties, items, anyOf, oneOf, allOf,
$ref, minimum, maximum, minLength, maxLength, pattern). A keyword outside that subset fails
loudly rather than being ignored, so the document cannot quietly outgrow its check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Final
from urllib.parse import unquote_to_bytes

__all__ = ["DOCUMENT", "Operation", "operations", "match", "validate", "contract_problems", "malformed_http"]

DOCUMENT: Final[dict[str, Any]] = json.loads(files("aidememo_ref").joinpath("openapi.json").read_bytes())
_METHODS: Final = ("get", "post", "put", "delete", "patch", "head", "options")
_KNOWN: Final = frozenset({
    "type", "const", "enum", "properties", "required", "additionalProperties", "items", "anyOf", "oneOf",
    "allOf", "$ref", "minimum", "maximum", "minLength", "maxLength", "pattern", "description", "default",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    method: str  # upper case
    template: str  # "/v1/projects/{project_id}/handoffs/{handoff_id}"
    spec: dict[str, Any]
    extension: str | None  # "test-clock" for paths served only with --test-clock

    @property
    def segments(self) -> tuple[str, ...]:
        """The template as the reference's route key: every ``{param}`` becomes ``*``."""
        return tuple("*" if s.startswith("{") else s for s in self.template.split("/")[1:])

    def statuses(self) -> set[int]:
        return {int(code) for code in self.spec["responses"]}


def operations() -> list[Operation]:
    out = []
    for template, item in DOCUMENT["paths"].items():
        for method in _METHODS:
            if method in item:
                out.append(Operation(method=method.upper(), template=template, spec=item[method],
                                     extension=item.get("x-aidememo-extension")))
    return out


def match(method: str, path: str) -> tuple[Operation | None, bool]:
    """The documented operation for a request, and whether its path (any method) is documented."""
    segments = path.split("?", 1)[0].split("/")[1:]
    path_known = False
    for op in operations():
        want = op.segments
        if len(want) == len(segments) and all(w == "*" or w == g for w, g in zip(want, segments)):
            path_known = True
            if op.method == ("GET" if method == "HEAD" else method):
                return op, True
    return None, path_known


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        schema = DOCUMENT["components"]["schemas"][name]
    return schema


_TYPES: Final = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty when it conforms)."""
    schema = _resolve(schema)
    unknown = set(schema) - _KNOWN
    if unknown:
        raise AssertionError(f"schema keyword(s) {sorted(unknown)} at {where} are outside the validated subset")
    problems: list[str] = []
    if "type" in schema and not _TYPES[schema["type"]](value):
        return [f"{where}: expected {schema['type']}, got {type(value).__name__}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: expected {schema['const']!r}, got {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} above {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']}")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            problems.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{where}: missing {name!r}")
        for name, item in value.items():
            if name in props:
                problems += validate(item, props[name], f"{where}.{name}")
            elif schema.get("additionalProperties", True) is False:
                problems.append(f"{where}: unexpected {name!r}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{where}[{i}]")
    for sub in schema.get("allOf", []):
        problems += validate(value, sub, where)
    for key, wanted in (("anyOf", None), ("oneOf", 1)):
        if key in schema:
            passing = sum(not validate(value, sub, where) for sub in schema[key])
            if passing == 0 or (wanted is not None and passing != wanted):
                problems.append(f"{where}: {passing} of the {key} alternatives match")
    return problems


def _path_is_utf8(path: str) -> bool:
    try:
        for segment in path.split("?", 1)[0].split("/"):
            unquote_to_bytes(segment.encode("latin-1")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_NOT_HTTP: Final = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def malformed_http(target: bytes, headers: tuple[tuple[bytes, bytes], ...] | list[tuple[bytes, bytes]]) -> bool:
    """Whether a request breaks HTTP/1.1 syntax (a request-target is visible ASCII; field values
    have no control characters), so the HTTP layer refuses it before any route sees it."""
    return (any(b <= 0x20 or b >= 0x7F for b in target)
            or any(_NOT_HTTP.search(name + value) for name, value in headers))


def contract_problems(method: str, path: str, status: int, headers: dict[str, str], body: bytes, *,
                      malformed: bool = False) -> list[str]:
    """How one real answer departs from the document (empty when it is a documented answer).

    Framework answers (empty 404 for an unknown path, empty 405 with ``Allow`` for a known path
    and another method, text 400 for a non-UTF-8 path segment or, with ``malformed``, for a
    request the HTTP layer refuses) are checked as the document's
    description states them; everything else must be a documented status with a body that
    validates against that status's schema.
    """
    content_type = headers.get("content-type", "")
    if status == 400 and content_type.startswith("text/plain") and (malformed or not _path_is_utf8(path)):
        return []  # the HTTP layer's refusal; HEAD gets its text too, as the method is unknown then
    bare = path.split("?", 1)[0]
    if "//" in bare or (bare.endswith("/") and bare != "/"):
        # Trailing slashes and empty segments are other paths to the framework: an empty 404.
        return [] if status == 404 and body == b"" else [f"{method} {path[:120]}: {status}, wanted an empty 404"]
    op, path_known = match(method, path)
    if op is None:
        if path_known:
            return [] if status == 405 and body == b"" and "allow" in headers else [f"{method} {path[:120]}: {status}, wanted empty 405 with Allow"]
        return [] if status == 404 and body == b"" else [f"{method} {path[:120]}: {status}, wanted an empty 404"]
    response = op.spec["responses"].get(str(status))
    if response is None:
        return [f"{method} {op.template}: undocumented status {status} ({body[:200]!r})"]
    if method == "HEAD":
        return [] if body == b"" else [f"HEAD {op.template}: non-empty body"]
    if not content_type.startswith("application/json"):
        return [f"{method} {op.template}: {status} with content-type {content_type!r}"]
    try:
        value = json.loads(body)
    except ValueError:
        return [f"{method} {op.template}: {status} body is not JSON: {body[:200]!r}"]
    schema = response["content"]["application/json"]["schema"]
    return [f"{method} {op.template} {status}: {p}" for p in validate(value, schema)]
