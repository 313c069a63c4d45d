"""Declared isolation: every check says what it needs, shared worlds refuse what their level
forbids (a wrong declaration reads ERROR), shared identities are the process's and the run's,
``--fresh-identities`` restores a fresh project per check, and no check of a whole run sees
another check's data."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.profiles.aidememo import checks as checks_package
from conformance.profiles.aidememo.isolation import Isolation, refusal

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent
CHECKS_DIR = Path(str(checks_package.__file__)).parent


def _check_functions() -> list[tuple[str, object]]:
    import importlib

    found = []
    for path in sorted(CHECKS_DIR.glob("test_*.py")):
        module = importlib.import_module(f"{checks_package.__name__}.{path.stem}")
        found += [(f"{path.name}::{name}", value) for name, value in vars(module).items()
                  if name.startswith("test_") and inspect.isfunction(value)]
    return found


def _marks(function: object, name: str) -> list[tuple[object, ...]]:
    return [tuple(m.args) for m in getattr(function, "pytestmark", ()) if m.name == name]


def test_every_check_declares_its_isolation_in_a_marker_and_its_docstring() -> None:
    functions = _check_functions()
    assert len(functions) > 100
    for check, function in functions:
        declared = _marks(function, "isolation")
        assert len(declared) == 1, f"{check} declares its isolation {len(declared)} times"
        level = Isolation(str(declared[0][0]))
        lines = [line.strip() for line in (inspect.getdoc(function) or "").splitlines()]
        said = [line for line in lines if line.startswith("Isolation: ")]
        assert said and said[0].startswith(f"Isolation: {level}:"), f"{check}: docstring says {said}, marker {level}"


def test_checks_needing_a_project_nobody_else_writes_to_are_not_shared() -> None:
    for check, function in _check_functions():
        if _marks(function, "fresh_project"):
            level = Isolation(str(_marks(function, "isolation")[0][0]))
            assert level in (Isolation.PROJECT, Isolation.ACTORS), f"{check} is fresh_project but {level}"


@pytest.mark.parametrize(("level", "method", "path", "body", "refused"), [
    (Isolation.SHARED, "GET", "/v1/projects/p/snapshot", None, True),
    (Isolation.SHARED, "GET", "/v1/projects/p/changes", None, True),
    (Isolation.SHARED, "GET", "/v1/projects/p/changes/materialized", None, True),
    (Isolation.SHARED, "GET", "/v1/projects/p/search", None, True),
    (Isolation.SHARED, "GET", "/v1/projects/p/handoffs", None, True),
    (Isolation.SHARED, "GET", "/v1/projects/p/handoffs/h1", None, False),
    (Isolation.SHARED, "GET", "/v1/projects/p/resources/custom.note/n1", None, False),
    (Isolation.SHARED, "POST", "/v1/commands", {}, False),
    (Isolation.SHARED, "POST", "/v1/projects/p/mcp", {"method": "tools/call", "params": {"name": "handoff_list"}}, True),
    (Isolation.SHARED, "POST", "/v1/projects/p/mcp", {"method": "tools/call", "params": {"name": "resource_get"}}, False),
    (Isolation.ACTORS, "GET", "/v1/projects/p/handoffs", None, False),
    (Isolation.ACTORS, "GET", "/v1/projects/p/snapshot", None, True),
    (Isolation.ACTORS, "POST", "/v1/projects/p/mcp", {"method": "tools/call", "params": {"name": "handoff_list"}}, False),
    (Isolation.ACTORS, "POST", "/v1/projects/p/mcp", {"method": "tools/call", "params": {"name": "search"}}, True),
    (Isolation.READS, "GET", "/v1/projects/p/snapshot", None, False),
    (Isolation.READS, "POST", "/v1/commands", {}, True),
    (Isolation.READS, "POST", "/v1/projects/p/sessions", {}, True),
    (Isolation.READS, "POST", "/v1/projects/p/mcp", {"method": "tools/call", "params": {"name": "session_create"}}, True),
    (Isolation.READS, "POST", "/v1/projects/p/mcp", {"method": "tools/list", "params": {}}, False),
    (Isolation.PROJECT, "GET", "/v1/projects/p/snapshot", None, False),
])
def test_each_level_refuses_what_it_forbids(level, method, path, body, refused) -> None:
    assert (refusal(level, method, path, body) is not None) == refused


WRONG = '''
import json, pytest
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.expect import expect_status

@isolation.SHARED
@pytest.mark.requirement("AM-SNAP-1")
def test_shared_reads_the_snapshot(world):
    expect_status(world.project().writer.snapshot(), 200)

@isolation.PROJECT
@pytest.mark.requirement("AM-SNAP-1")
def test_project_reads_the_snapshot(world):
    expect_status(world.project().writer.snapshot(), 200)

@isolation.READS
@pytest.mark.requirement("AM-CMD-1")
def test_reads_writes(world):
    world.project().writer.put(world.new_id("note"), {"v": 1})

@isolation.SHARED
@pytest.mark.requirement("AM-AUTH-3", clauses=("member",))
def test_shared_asks_for_two_projects(world):
    world.project()
    world.project()

@isolation.ACTORS
@pytest.mark.requirement("AM-MBOX-1", clauses=("relative",))
def test_actors_read_their_mailbox(world):
    expect_status(world.project().writer.mailbox("inbox"), 200)

@isolation.actors("writer")
@pytest.mark.requirement("AM-MBOX-1", clauses=("relative",))
def test_actors_read_a_shared_actor_s_mailbox(world):
    project = world.project(writers=("writer", "other"))
    expect_status(project.writer.mailbox("inbox"), 200)
    expect_status(project.other.mailbox("inbox"), 200)
'''


def _results(pytester) -> dict[str, dict]:
    return {r["nodeid"].split("::")[-1]: r for r in
            json.loads((pytester.path / "aidememo-report" / "results.json").read_text())["records"]}


def test_a_wrong_declaration_reads_error_not_fail(pytester) -> None:
    pytester.makepyfile(test_wrong=WRONG)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    records = _results(pytester)
    verdicts = {name: record["verdict"] for name, record in records.items()}
    assert verdicts == {"test_shared_reads_the_snapshot": "ERROR", "test_project_reads_the_snapshot": "PASS",
                        "test_reads_writes": "ERROR", "test_shared_asks_for_two_projects": "ERROR",
                        "test_actors_read_their_mailbox": "PASS", "test_actors_read_a_shared_actor_s_mailbox": "ERROR"
                        }, verdicts
    assert "isolation 'shared'" in records["test_shared_reads_the_snapshot"]["reason"]
    assert "a second project" in records["test_shared_asks_for_two_projects"]["reason"]
    assert "shared actor other" in records["test_actors_read_a_shared_actor_s_mailbox"]["reason"]
    # Refused before sending: the target never saw the snapshot request.
    assert "snapshot" not in json.dumps(records["test_shared_reads_the_snapshot"].get("transcript", []))


IDS = '''
import json, pytest
from conformance.profiles.aidememo import isolation

def _note(world, name):
    project = world.project(writers=("writer",), readers=("reader",))
    with open("ids.jsonl", "a") as handle:
        handle.write(json.dumps([name, project.project_id, project.writer.actor_id, project.reader.actor_id]) + "\\n")

@isolation.SHARED
@pytest.mark.requirement("AM-ID-1")
def test_one(world):
    _note(world, "one")

@isolation.SHARED
@pytest.mark.requirement("AM-ID-1")
def test_two(world):
    _note(world, "two")

@isolation.ACTORS
@pytest.mark.requirement("AM-ID-1")
def test_three(world):
    _note(world, "three")

@isolation.actors("writer")
@pytest.mark.requirement("AM-ID-1")
def test_four(world):
    _note(world, "four")
'''


def _ids(pytester, *args: str) -> dict[str, list[str]]:
    (pytester.path / "ids.jsonl").unlink(missing_ok=True)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    lines = [json.loads(line) for line in (pytester.path / "ids.jsonl").read_text().splitlines()]
    return {name: ids for name, *ids in lines}


def test_shared_identities_are_the_process_s_and_new_in_every_run(pytester) -> None:
    pytester.makepyfile(test_ids=IDS)
    first, second = _ids(pytester), _ids(pytester)
    assert first["one"] == first["two"], "two shared checks of one process share project and actors"
    assert first["three"][0] == first["one"][0] and first["three"][1:] != first["one"][1:], (
        "fresh actors live in the shared project")
    assert first["four"][0] == first["one"][0] and first["four"][1] not in (first["one"][1], first["three"][1]), (
        "an actors check's own actor is fresh")
    assert first["four"][2] == first["one"][2], "the actors it does not list are the process's shared ones"
    assert set(first["one"]).isdisjoint(second["one"]), "a new run provisions new shared identities"


@pytest.mark.parametrize("how", ["flag", "ini"])
def test_fresh_identities_give_every_check_a_fresh_project(pytester, how: str) -> None:
    pytester.makepyfile(test_ids=IDS)
    if how == "ini":
        pytester.makeini("[pytest]\naidememo_fresh_identities = true\n")
    ids = _ids(pytester, *(["--aidememo-fresh-identities"] if how == "flag" else []))
    projects = {ids[name][0] for name in ("one", "two", "three", "four")}
    assert len(projects) == 4, f"every check a project of its own: {ids}"


def _probe(tmp_path: Path, name: str, *extra: str) -> tuple[list[dict], dict[str, str]]:
    probe = tmp_path / f"{name}.jsonl"
    env = {**os.environ, "LEAK_PROBE_FILE": str(probe),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    report = tmp_path / name
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p",
                    "leak_probe", "--pyargs", "conformance.profiles.aidememo.checks", "--aidememo-seed", "5",
                    "--aidememo-report-dir", str(report), *extra],
                   capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    records = json.loads((report / "results.json").read_text())["records"]
    verdicts = {r["nodeid"].rsplit("/", 1)[-1]: r["verdict"] for r in records}
    return [json.loads(line) for line in probe.read_text().splitlines()], verdicts


def test_no_check_sees_another_checks_data_and_a_leak_would_show(tmp_path: Path) -> None:
    seen, verdicts = _probe(tmp_path, "reference")
    assert len(seen) > 200 and {line["isolation"] for line in seen} >= {"shared", "reads", "actors", "project"}
    assert all(verdict in ("PASS", "SKIP") for verdict in verdicts.values()), verdicts
    assert [(line["check"], line["foreign"]) for line in seen if line["foreign"]] == []
    # The probe is not blind: a server whose mailboxes list every handoff of the project shows fresh-actor
    # checks the shared project's other handoffs, and those checks fail.
    leaked, verdicts = _probe(tmp_path, "leaky", "-k", "mailbox or handoff", "--aidememo-embedded-factory",
                              "leaky:mailbox_lists_the_project")
    showing = [line["check"] for line in leaked if line["foreign"]]
    assert showing and all(line["isolation"] == "actors" for line in leaked if line["foreign"]), leaked
    assert any(verdicts[check] == "FAIL" for check in showing), {check: verdicts[check] for check in showing}
