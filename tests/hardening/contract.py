"""The reference's OpenAPI document as a test oracle: route matching and schema validation.

Answers are validated with ``jsonschema``'s Draft 2020-12 validator (OpenAPI 3.1's schema
dialect), with integers strict (no ``1.0``, no booleans), as the wire's u64 fields are.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Final
from urllib.parse import unquote_to_bytes

from jsonschema import Draft202012Validator, validators
from jsonschema import TypeChecker

__all__ = ["DOCUMENT", "Operation", "operations", "match", "validate", "check_document", "contract_problems",
           "malformed_http"]

DOCUMENT: Final[dict[str, Any]] = json.loads(files("aidememo_ref").joinpath("openapi.json").read_bytes())
_METHODS: Final = ("get", "post", "put", "delete", "patch", "head", "options")


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


def _strict_integer(checker: TypeChecker, value: object) -> bool:
    # JSON Schema counts 1.0 as an integer; the wire's u64 fields never carry a fraction or a bool.
    return isinstance(value, int) and not isinstance(value, bool)


# OpenAPI 3.1 schemas are JSON Schema 2020-12; integers are strict, as serde's u64 is.
_Validator: Final = validators.extend(
    Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer)
)


@functools.cache
def _validator(schema_text: str) -> Any:
    return _Validator({**json.loads(schema_text), "components": DOCUMENT["components"]})


def validate(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema``, a schema of the document (empty when it conforms).

    The schema is checked with the document's components beside it, so its ``#/components/...``
    references resolve as they do in the document itself.
    """
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value),
                    key=lambda e: list(e.absolute_path))
    return [f"{where}{e.json_path.removeprefix('$')}: {e.message[:300]}" for e in errors]


def check_document() -> None:
    """Raise ``jsonschema.SchemaError`` if a component schema is not a valid 2020-12 schema."""
    for schema in DOCUMENT["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


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
