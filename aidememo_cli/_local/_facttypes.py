"""Fact types: upstream's ten kinds, its alias table, and its keyword inference.

Upstream accepts any ``--type`` text on the command line (unrecognised text becomes
``unknown``), refuses unrecognised text over MCP, and infers a type from strong cues when none
is given. The cue table below is upstream's ``infer_fact_type`` (first match wins), so the same
content gets the same type and the same ``fact_type_source`` here as there.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FactType", "parse_fact_type", "infer_fact_type", "WriteType", "resolve_write_type"]


class FactType(StrEnum):
    DECISION = "decision"
    PATTERN = "pattern"
    CONVENTION = "convention"
    CLAIM = "claim"
    NOTE = "note"
    QUESTION = "question"
    PREFERENCE = "preference"
    LESSON = "lesson"
    ERROR = "error"
    UNKNOWN = "unknown"


_ALIASES: dict[str, FactType] = {
    "decision": FactType.DECISION, "decisions": FactType.DECISION,
    "pattern": FactType.PATTERN, "patterns": FactType.PATTERN,
    "convention": FactType.CONVENTION, "conventions": FactType.CONVENTION, "rule": FactType.CONVENTION,
    "claim": FactType.CLAIM, "claims": FactType.CLAIM,
    "note": FactType.NOTE, "notes": FactType.NOTE,
    "question": FactType.QUESTION, "questions": FactType.QUESTION,
    "preference": FactType.PREFERENCE, "preferences": FactType.PREFERENCE, "pref": FactType.PREFERENCE,
    "lesson": FactType.LESSON, "lessons": FactType.LESSON, "learning": FactType.LESSON,
    "error": FactType.ERROR, "err": FactType.ERROR, "errors": FactType.ERROR, "mistake": FactType.ERROR,
    "failure": FactType.ERROR,
}


def parse_fact_type(text: str) -> FactType:
    """Upstream's ``FactType::parse``: aliases, case-insensitive; anything else is ``unknown``."""
    return _ALIASES.get(text.lower(), FactType.UNKNOWN)


# (type, starts-with cues, contains cues), in upstream's order; the first match wins.
_CUES: tuple[tuple[FactType, tuple[str, ...], tuple[str, ...]], ...] = (
    (FactType.DECISION, ("decision",), ("decided", "we picked", "we chose", "i chose", "i picked",
                                        "let's go with", "going with", "rolled out")),
    (FactType.PREFERENCE, ("preference",), ("i prefer", "we prefer", "user prefers", "team prefers",
                                            "my favorite", "my favourite", "i like ", "i dislike ")),
    (FactType.LESSON, ("lesson",), ("we learned", "i learned", "learned that", "tried ", "turns out",
                                    "wish i had", "root cause was", "caused by")),
    (FactType.ERROR, ("error", "mistake"), ("avoid ", "do not ", "don't ", "never again", "was a mistake",
                                            "failure mode")),
    (FactType.CONVENTION, ("always ",), (" always ", " never ", "convention", "house rule", " rule:")),
    (FactType.PATTERN, (), ("pattern", "antipattern", "anti-pattern", " is implemented with ",
                            " are implemented with ")),
    (FactType.CLAIM, ("claim:",), ("we believe", "we think", " claim ")),
)


def infer_fact_type(text: str) -> FactType:
    """The type strong keyword cues suggest; ``note`` when none does."""
    lowered = text.strip().lower()
    if lowered.endswith("?") or lowered.startswith(("question", "why ")) or " why " in lowered:
        return FactType.QUESTION
    for kind, prefixes, fragments in _CUES:
        if (prefixes and lowered.startswith(prefixes)) or any(cue in lowered for cue in fragments):
            return kind
        if kind is FactType.PATTERN and " uses " in lowered and " for " in lowered:
            return kind
    return FactType.NOTE


class WriteType:
    """The stored type, where it came from (``explicit``/``inferred``/``default``), and a hint."""

    __slots__ = ("fact_type", "source", "hint")

    def __init__(self, fact_type: FactType, source: str, hint: FactType | None) -> None:
        self.fact_type = fact_type
        self.source = source
        self.hint = hint


def resolve_write_type(content: str, explicit: FactType | None) -> WriteType:
    """Upstream's rule: an explicit type stands (an explicit ``note`` with a strong cue gets a
    hint); without one, a strong cue is used, else ``note``."""
    inferred = infer_fact_type(content)
    if explicit is not None:
        hint = inferred if explicit is FactType.NOTE and inferred is not FactType.NOTE else None
        return WriteType(explicit, "explicit", hint)
    if inferred is not FactType.NOTE:
        return WriteType(inferred, "inferred", None)
    return WriteType(FactType.NOTE, "default", None)
