"""scripts/mutation.py's own rules, without running cosmic-ray: which survivors are explained
(annotations by construction, the listed equivalents by their key) and how the score is counted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutation():
    spec = importlib.util.spec_from_file_location("mutation_script", REPO / "scripts" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_script"] = module
    spec.loader.exec_module(module)
    return module


SOURCE = '''from __future__ import annotations

def f(x: int | None, y: str = "a") -> bool | None:
    z: int | None = 1
    return x is None or y == "b" | z
'''


def test_only_mutants_inside_annotations_are_annotation_mutants(mutation):
    spans = mutation.annotation_spans(SOURCE)

    def at(line, column):
        return mutation.Mutant(module="m.py", function="f", operator="o", occurrence=0, line=line, outcome="survived",
                               diff="", column=column)

    assert mutation.in_annotation(at(3, 9), spans)  # the argument's int | None
    assert mutation.in_annotation(at(3, 39), spans)  # the return annotation
    assert mutation.in_annotation(at(4, 7), spans)  # an annotated assignment's annotation
    assert not mutation.in_annotation(at(4, 20), spans)  # its value
    assert not mutation.in_annotation(at(5, 11), spans)  # the body
    # Without the future import annotations are evaluated: none counts as equivalent.
    assert mutation.annotation_spans(SOURCE.replace("from __future__ import annotations\n", "")) == []


def test_the_score_counts_only_unexplained_survivors(mutation):
    def mutant(function, outcome, line=5, occurrence=0):
        return mutation.Mutant(module="m.py", function=function, operator="core/X", occurrence=occurrence, line=line,
                               outcome=outcome, diff="- a\n+ b", column=4)

    mutants = [mutant("f", "killed"), mutant("f", "killed"), mutant("f", "survived", line=3),  # an annotation
               mutant("g", "survived"), mutant("h", "survived"), mutant("f", "no-test")]
    text, unexplained = mutation.report(mutants, {("m.py", "g", "core/X", 0): "unreachable"},
                                        {"m.py": [((3, 0), (3, 80))]})
    assert unexplained == 1
    assert "m.py" in text and "score  66.7%  killed 2, survived 1, annotation 1, equivalent 1, no-test 1" in text
    assert "SURVIVED m.py:5 h core/X occurrence 0" in text


def test_every_listed_equivalent_names_a_rule_module_and_a_reason(mutation):
    text = (REPO / "docs" / "mutation-equivalents.toml").read_text()
    import tomllib

    entries = tomllib.loads(text)["equivalent"]
    keys = [(e["module"], e["function"], e["operator"], e["occurrence"]) for e in entries]
    assert len(keys) == len(set(keys)), "an equivalent is listed twice"
    modules = {f"aidememo_ref/{name}.py" for name in mutation.MODULES}
    for entry in entries:
        assert entry["module"] in modules and entry["reason"].strip(), entry
    assert len(mutation.load_equivalents()) == len(entries)


def test_mutants_inside_annotations_are_not_run_and_count_as_annotations(mutation, tmp_path):
    pytest.importorskip("cosmic_ray")
    import subprocess

    from cosmic_ray.work_db import WorkDB, use_db

    source = tmp_path / "m.py"
    source.write_text(SOURCE)
    config = tmp_path / "m.toml"
    config.write_text(f'[cosmic-ray]\nmodule-path = "{source}"\ntimeout = 10\nexcluded-modules = []\n'
                      'test-command = "false"\n\n[cosmic-ray.distributor]\nname = "local"\n')
    session = tmp_path / "m.sqlite"
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", str(config), str(session)], check=True,
                   capture_output=True)
    skipped = mutation._skip_annotations(session, source)
    spans = mutation.annotation_spans(SOURCE)
    with use_db(str(session), WorkDB.Mode.open) as db:
        done = {item.job_id: result for item, result in db.completed_work_items}
        every = list(db.work_items)
    inside = [item for item in every if any(a <= tuple(item.mutations[0].start_pos) < b for a, b in spans)]
    assert skipped == len(inside) > 0 and len(every) > len(inside)
    assert set(done) == {item.job_id for item in inside}, "only the annotations' mutants are recorded, none run"
    assert {result.worker_outcome.value for result in done.values()} == {"skipped"}
    mutants = [mutation.Mutant(module="m.py", function="f", operator="o", occurrence=0, line=3, outcome="skipped",
                               diff="", column=9)]
    text, unexplained = mutation.report(mutants, {}, {"m.py": spans})
    assert unexplained == 0 and "annotation 1" in text, text


@pytest.mark.parametrize(("verdicts", "body", "code"), [
    (["PASS", "SKIP"], "def test_ok(): pass", 0),
    (["PASS", "WARN"], "def test_ok(): pass", 1),  # a SHOULD broken: the reference reads PASS throughout
    (["PASS"], "def test_bad(): assert False", 1),
], ids=["pass", "warn", "fail"])
def test_the_judge_kills_a_mutant_on_a_failure_or_a_warning(mutation, tmp_path, verdicts, body, code):
    import json

    (tmp_path / "test_x.py").write_text(body + "\n")
    (tmp_path / "results.json").write_text(json.dumps(
        {"records": [{"nodeid": f"c{i}", "verdict": v} for i, v in enumerate(verdicts)]}))
    args = ["-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_x.py")]
    assert (mutation.judge(tmp_path, args) != 0) == bool(code)
