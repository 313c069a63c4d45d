"""Records cannot be confused: every NamedTuple in the packages compares as a record of its own
type (``refkit.records.distinct``), never as the bare tuple of its fields.

The classes are found by importing every module of the packages, so a new NamedTuple without
``@distinct`` fails here by name.
"""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from aidememo_ref._commands import FactCreatePayload, HandoffClaimPayload, SessionCreatePayload
from refkit.records import distinct, is_distinct

REPO = Path(__file__).resolve().parents[1]
PACKAGES: list[str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]


def _tuple_records() -> list[type[tuple[Any, ...]]]:
    found: list[type[tuple[Any, ...]]] = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.rpartition(".")[2] == "__main__":  # importing one runs the command line
                continue
            module = importlib.import_module(info.name)
            found += [value for value in vars(module).values()
                      if isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
                      and value.__module__ == module.__name__]
    return found


RECORDS = _tuple_records()


def _instance(cls: type[tuple[Any, ...]]) -> tuple[Any, ...]:
    return tuple.__new__(cls, tuple(range(len(cls._fields))))  # type: ignore[attr-defined]


def _twin(cls: type[tuple[Any, ...]]) -> type[tuple[Any, ...]]:
    """Another record type with the same field names, as another module might declare."""
    return distinct(NamedTuple(f"Twin{cls.__name__}", [(name, Any) for name in cls._fields]))  # type: ignore[attr-defined,misc]


def test_the_walk_finds_the_record_families() -> None:
    names = {cls.__name__ for cls in RECORDS}
    assert {"Command", "SessionCreatePayload", "Receipt", "Write", "Row", "Fact", "Replay"} <= names
    assert len(RECORDS) >= 30


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_every_tuple_record_is_distinct(cls: type[tuple[Any, ...]]) -> None:
    assert is_distinct(cls), f"{cls.__qualname__} needs @distinct (refkit.records)"
    record, same = _instance(cls), _instance(cls)
    assert record == same and hash(record) == hash(same) and not record != same
    plain, twin = tuple(record), tuple.__new__(_twin(cls), tuple(record))
    for other in (plain, twin):
        assert record != other and other != record and not record == other
        assert hash(record) != hash(other)
    assert len({record, plain, twin}) == 3
    with pytest.raises(TypeError):
        record < plain  # noqa: B015  # ordering across types is refused, not decided by the values


def test_the_reported_confusions_are_gone() -> None:
    assert SessionCreatePayload("a", "b", "c") != FactCreatePayload("a", "b", "c")
    assert HandoffClaimPayload("c") != ("c",) and ("c",) != HandoffClaimPayload("c")
    assert hash(HandoffClaimPayload("c")) != hash(("c",))
    assert {HandoffClaimPayload("c"): 1}.get(("c",)) is None


def test_a_bare_named_tuple_would_fail_the_check() -> None:
    class Bare(NamedTuple):
        claim_id: str

    assert not is_distinct(Bare)
    assert Bare("c") == ("c",) and hash(Bare("c")) == hash(("c",))  # the hazard @distinct removes
