"""What the AideMemo protocol leaves to each server: the values two correct servers may answer differently.

Each rule below is stated once, with the clause of the spec (``aidememo-wire.md``, W; ``ERRATA.md``,
E) that leaves the value open, and says what is still compared. ``Comparable`` applies them to a
JSON answer, turning each open value into a placeholder that equals any other server's choice and
keeps what the clause does fix. ``diff`` compares every answer through it (``diff/compare.py``);
the suite's checks use it where they hold two answers side by side (``checks/test_mcp.py``) and
cite its rules where they look at one value alone. Everything no rule names is compared value
for value: a difference there is a divergence.

Not relaxed here: E 1 allows a last-digit difference in how a server parses an exotic float (so in
a raw payload's fingerprint and stored body); diff sends no such float, so none is tolerated. A
503 (E 7) is an outcome, not a value: the wire layer retries it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

from refkit.jsonvalue import loads

__all__ = ["Rule", "RULES", "EPOCH", "TIME", "SCHEMA_VERSION", "MESSAGE", "SCORE", "SNAPSHOT_ORDER",
           "SERVER_VERSION", "TEXT", "Comparable", "comparable", "in_rank_order", "open_key"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One value the spec leaves to the server."""

    name: str
    where: str  # the fields it covers, in diff's field paths
    clause: str  # the spec's words that leave it open
    compared: str  # what of it is still compared
    keys: tuple[str, ...] = ()  # JSON keys whose value it leaves open wherever they appear ("*_x": a suffix)


EPOCH: Final = Rule(
    "epoch", "project_epoch, epoch (anywhere)",
    "W §0: project_epoch is an opaque string naming one history generation, set at bootstrap (a fresh ULID "
    "unless --project-epoch is given); W §7.4: server-generated",
    "as a bijection: numbered by first appearance on each side, so one epoch where the other server has one",
    ("project_epoch", "epoch"))
TIME: Final = Rule(
    "time", "*_at_ms, now_ms (anywhere)",
    "W §2.5: committed_at_ms is the server's clock at commit; W §3: now_ms is the wall clock, read once per request",
    "the type (an integer); in a handoff record, the lease's length (claim_expires_at_ms - claim_heartbeat_at_ms, "
    "W §3: now + 120000)", ("*_at_ms", "now_ms"))
SCHEMA_VERSION: Final = Rule(
    "schema_version", "schema_version of GET /health",
    "W §1.1 and §8 item 6: backend-specific (4 on SQLite, 2 on PostgreSQL), not a protocol version",
    "the type (an integer)", ("schema_version",))
MESSAGE: Final = Rule(
    "message", "error.message (REST and JSON-RPC errors, also inside an MCP tool result's text)",
    "W §8 item 1: codes and statuses are the stable contract, messages are not promised anywhere",
    "the type (a string); the code beside it. Not relaxed for authentication_failed: W §4.1 fixes every 401's "
    "body, message included (asserted upstream)", ("message",))
SCORE: Final = Rule(
    "score", "results[*].score, results[*].lexical_score, results[*].semantic_score of a search",
    "W §8 item 8: exact float scores are implementation-defined; assert order and presence rather than values",
    "presence and type (a number), the results' order (W §5.5: score descending, then fact_id), that each "
    "server's own scores descend in that order, and that lexical_score equals score (W §1.6)",
    ("score", "lexical_score", "semantic_score"))
SNAPSHOT_ORDER: Final = Rule(
    "snapshot order", "resources of GET /snapshot",
    "W §8 item 5: snapshot order follows the database's collation on PostgreSQL and byte order on SQLite; "
    "compare snapshots as sets keyed by (kind, id)",
    "every resource, keyed by (kind, id)")
SERVER_VERSION: Final = Rule(
    "server version", "result._meta[io.modelcontextprotocol/serverInfo].version of the MCP gateway",
    "W §1.18: the version is the server's own crate version",
    "the type (a string); the name beside it")
TEXT: Final = Rule(
    "text", "server/discover's instructions; each tool's title and description (MCP gateway)",
    "W §1.18 leaves the instructions as \"...\"; like messages (W §8 item 1), prose for people, not the protocol",
    "the type (a string); names, schemas and annotations beside them", ("instructions", "title", "description"))
RULES: Final = (EPOCH, TIME, SCHEMA_VERSION, MESSAGE, SCORE, SNAPSHOT_ORDER, SERVER_VERSION, TEXT)

_SCORE_KEYS: Final = SCORE.keys
_OPEN_KEYS: Final = frozenset(k for rule in RULES for k in rule.keys if not k.startswith("*"))
_OPEN_SUFFIXES: Final = tuple(k[1:] for rule in RULES for k in rule.keys if k.startswith("*"))
_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
_TOOL_FAILED: Final = "AideMemo tool request failed with HTTP "  # upstream's text of a failed tool call


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def open_key(key: str) -> bool:
    """A JSON key whose value a rule above leaves open wherever it appears (its ``keys``).

    Key-level, so coarser than ``Comparable``: what a reproduction's expected answers do not pin
    (``oracle.py``). Nested values (the MCP server's version) and snapshot order are not keys.
    """
    return key in _OPEN_KEYS or key.endswith(_OPEN_SUFFIXES)


def in_rank_order(results: list[Any]) -> bool:
    """``results`` (a search's) carry numeric scores that never rise: the order W §5.5 ranks by."""
    values = [hit.get("score") if isinstance(hit, dict) else None for hit in results]
    scores = [value for value in values if _number(value)]
    return len(scores) == len(values) and all(a >= b for a, b in zip(scores, scores[1:]))


@dataclass(slots=True)
class Comparable:
    """One server's answers with what that server chose replaced by placeholders (the rules above).

    Keep one per server for a whole exchange: epochs are numbered by first appearance.

    Args:
        rules: the rules to apply (all by default).
        strings: applied to every string first (``diff`` names its episode's ids there).
    """

    rules: tuple[Rule, ...] = RULES
    strings: Callable[[str], str] = str
    epochs: dict[str, str] = field(default_factory=dict)

    def value(self, data: Any, key: str = "") -> Any:
        """``data`` (a decoded JSON answer, or a part of it under ``key``) with its open values replaced."""
        if isinstance(data, dict):
            return self._object(data)
        if isinstance(data, list):
            return [self.value(item, key) for item in data]
        if isinstance(data, str):
            return self._string(data, key)
        if isinstance(data, int) and not isinstance(data, bool):
            if TIME in self.rules and (key.endswith("_at_ms") or key == "now_ms"):
                return "<time>"
            if SCHEMA_VERSION in self.rules and key == "schema_version":
                return "<integer>"
        return data

    def _object(self, data: dict[str, Any]) -> dict[str, Any]:
        out = {k: self.value(v, k) for k, v in data.items()}
        if TIME in self.rules:
            beat, expires = data.get("claim_heartbeat_at_ms"), data.get("claim_expires_at_ms")
            if isinstance(beat, int) and isinstance(expires, int) and not isinstance(expires, bool):
                out["claim_expires_at_ms"] = f"<time> + {expires - beat}"
        error = data.get("error")
        if (MESSAGE in self.rules and isinstance(error, dict) and isinstance(error.get("message"), str)
                and error.get("code") != "authentication_failed"):
            out["error"] = {**out["error"], "message": "<message>"}
        if SCORE in self.rules and isinstance(data.get("results"), list):
            out["results"] = self._ranked(data["results"], out["results"])
        if SNAPSHOT_ORDER in self.rules and "at_seq" in data and isinstance(out.get("resources"), list):
            out["resources"] = sorted(out["resources"], key=_resource_key)
        info = out.get("_meta", {}).get(_SERVER_INFO) if isinstance(out.get("_meta"), dict) else None
        if SERVER_VERSION in self.rules and isinstance(info, dict) and isinstance(info.get("version"), str):
            out["_meta"] = {**out["_meta"], _SERVER_INFO: {**info, "version": "<version>"}}
        if TEXT in self.rules:
            prose = ("instructions",) if "supportedVersions" in data else ("title", "description") \
                if "inputSchema" in data else ()
            out.update({k: "<text>" for k in prose if isinstance(data.get(k), str)})
        return out

    @staticmethod
    def _ranked(results: list[Any], normalized: list[Any]) -> list[Any]:
        if not in_rank_order(results):
            return normalized  # scores out of their own order stay literal: that is a difference
        out = []
        for hit, shown in zip(results, normalized):
            if isinstance(shown, dict):
                shown = dict(shown)
                for k in _SCORE_KEYS:
                    if _number(hit.get(k)) and (k != "lexical_score" or hit[k] == hit["score"]):
                        shown[k] = "<score>"
            out.append(shown)
        return out

    def _string(self, data: str, key: str) -> Any:
        data = self.strings(data)
        if EPOCH in self.rules and key in ("project_epoch", "epoch"):
            return self.epochs.setdefault(data, f"<epoch#{len(self.epochs) + 1}>")
        if data.startswith(_TOOL_FAILED) and ": " in data:
            head, _, rest = data.partition(": ")
            inner = self._json_text(rest, key)
            return data if inner is None else {"<text>": head, "<json>": inner}
        if data[:1] in ("{", "[") and len(data) > 1:
            inner = self._json_text(data, key)
            return data if inner is None else {"<json>": inner}
        return data

    def _json_text(self, text: str, key: str) -> Any:
        try:
            return self.value(loads(text), key)
        except ValueError:
            return None


def _resource_key(entry: Any) -> tuple[bytes, bytes]:
    resource = entry.get("resource") if isinstance(entry, dict) else None
    if not isinstance(resource, dict):
        return (b"", b"")
    return (str(resource.get("kind")).encode("utf-8"), str(resource.get("id")).encode("utf-8"))


def comparable(data: Any, *rules: Rule) -> Any:
    """``data`` with the given rules' values replaced (all rules when none is named), on a fresh numbering."""
    return Comparable(rules=rules or RULES).value(data)
