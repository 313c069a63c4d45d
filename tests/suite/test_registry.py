"""Requirement registries: clauses are parsed and refused like every other key, and every clause
of every installed profile is read by at least one of its checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.errors import ConfigError
from conformance.installed import installed_profiles
from conformance.registry import Clause, Registry, load_registry

ENTRY = '[[requirement]]\nid = "P-1"\nlevel = "MUST"\nsource = "here"\ntext = "It does a and b."\n'


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, name: str) -> Registry:
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "requirements.toml").write_text(ENTRY + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    return load_registry("p", name, "P-", ("core",))


def test_clauses_keep_the_order_the_sentence_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = _load(tmp_path, monkeypatch, 'clauses.b-part = "and b"\nclauses.a = "it  does a"\n', "reg_ok")
    requirement = registry.get("P-1")
    assert requirement.clauses == (Clause("b-part", "and b"), Clause("a", "it does a"))
    assert requirement.clause_problem(("a",)) is None
    assert requirement.clause_problem(()) == (
        "P-1 has clauses (b-part, a): name the ones the check reads (clauses=(...))")


@pytest.mark.parametrize(("body", "message"), [
    ('clauses.only = "the whole sentence"\n', "one clause is the whole sentence: leave clauses out"),
    ('clauses.Bad = "x"\nclauses.b = "y"\n', "clause 'Bad' needs a lower-case id and a text"),
    ('clauses.a = ""\nclauses.b = "y"\n', "clause 'a' needs a lower-case id and a text"),
    ('clauses = "a and b"\n', "clauses must be a table of clause id = text"),
], ids=["single", "upper-case-id", "empty-text", "not-a-table"])
def test_malformed_clauses_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str,
                                       message: str) -> None:
    with pytest.raises(ConfigError, match=f"requirement\\[0\\]: {message}"):
        _load(tmp_path, monkeypatch, body, f"reg_{abs(hash(body)) % 10**8}")


@pytest.mark.parametrize("profile", sorted(installed_profiles()))
def test_every_clause_of_every_requirement_is_read_by_a_check(profile: str) -> None:
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "requirements", "--profile", profile],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = next(line for line in done.stdout.splitlines() if "clauses no check reads:" in line)
    assert summary.endswith("clauses no check reads: none"), summary
