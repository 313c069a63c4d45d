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


def test_every_upstream_guard_is_read_by_a_check() -> None:
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "requirements", "--profile", "aidememo"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = next(line for line in done.stdout.splitlines() if line.startswith("upstream guards no check reads:"))
    assert summary == "upstream guards no check reads: none", summary


GUARD = ('[[guard]]\nid = "g"\nupstream = "u.rs"\nfunction = "f"\nrule = "r"\nreference = "x.py"\n'
         'reads = [{reads}]\n')


@pytest.mark.parametrize(("reads", "message"), [
    ('"P-2"', "unknown requirement 'P-2'"),
    ('"P-1:c"', "P-1 has no clause 'c'"),
    ('"P-1"', r"P-1 has clauses \(a, b\): name the ones"),
    ('', "reads must be a non-empty list"),
], ids=["unknown-requirement", "unknown-clause", "clause-missing", "empty"])
def test_a_guard_must_name_real_clauses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: str,
                                        message: str) -> None:
    name = f"guards_{abs(hash(reads)) % 10**8}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "requirements.toml").write_text(ENTRY + 'clauses.a = "a"\nclauses.b = "b"\n')
    (package / "guards.toml").write_text(GUARD.format(reads=reads))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=f"guards.toml: guard\\[0\\]: {message}"):
        load_registry("p", name, "P-", ("core",))


def test_traceability_shows_each_guard_beside_its_clauses() -> None:
    from conformance.reports.traceability import trace, unread_guards

    registry = installed_profiles()["aidememo"].registry()
    rows = {row["id"]: row for row in trace(registry, [])}
    send = rows["AM-HL-SEND-3"]
    assert {g["id"] for g in send["guards"]} >= {"send.context-session", "send.context-route-sender",
                                                 "send.context-route-receiver", "send.context-source"}
    clauses = {c["id"]: c["guards"] for c in send["clauses"]}
    assert clauses["sender"] == ["send.context-route-sender"] and clauses["receiver"] == ["send.context-route-receiver"]
    # With no check collected, every guard is unread.
    assert unread_guards(registry, []) == [g.id for g in registry.guards]
