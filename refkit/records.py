"""Tuple records that compare by type as well as by value.

The request paths build their records as ``NamedTuple``s: one is built per request or per log
row, and a tuple is cheaper to build than a frozen dataclass (``python bench/records.py`` times
both). A bare NamedTuple is still
a tuple, though: ``SessionCreatePayload('a', 'b', 'c') == FactCreatePayload('a', 'b', 'c')`` and
``HandoffClaimPayload('c') == ('c',)`` would be True, with equal hashes. ``@distinct`` keeps the
tuple (its speed, unpacking, ``_replace``) and makes equality, hashing and ordering those of a
record: equal only to the same type with equal fields, hashed apart from other types, and
unordered against anything else. Every NamedTuple in the packages carries it (a test walks
them).
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["distinct", "is_distinct"]

_T = TypeVar("_T", bound=type[tuple[Any, ...]])


def _eq(self: tuple[Any, ...], other: object) -> bool:
    # False, not NotImplemented, for another tuple: Python would then try tuple.__eq__ reflected,
    # which accepts any tuple subclass and compares values only.
    return type(other) is type(self) and tuple.__eq__(self, other) is True


def _ne(self: tuple[Any, ...], other: object) -> bool:
    return not _eq(self, other)


def _hash(self: tuple[Any, ...]) -> int:
    return hash((type(self), tuple.__hash__(self)))


def _ordering(name: str) -> Any:
    compare = getattr(tuple, name)

    def method(self: tuple[Any, ...], other: object) -> bool:
        if type(other) is not type(self):
            raise TypeError(f"{type(self).__name__} is not ordered against {type(other).__name__}")
        result: bool = compare(self, other)
        return result

    method.__name__ = name
    return method


_METHODS: dict[str, Any] = {
    "__eq__": _eq, "__ne__": _ne, "__hash__": _hash,
    **{name: _ordering(name) for name in ("__lt__", "__le__", "__gt__", "__ge__")},
}


def distinct(cls: _T) -> _T:
    """Class decorator for a NamedTuple: equal, hashed and ordered as a record of its own type."""
    for name, method in _METHODS.items():
        setattr(cls, name, method)
    return cls


def is_distinct(cls: type) -> bool:
    """Whether ``cls`` compares as ``@distinct`` makes it (the records test asks of every tuple type)."""
    return all(getattr(cls, name, None) is method for name, method in _METHODS.items())
