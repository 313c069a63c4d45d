#!/usr/bin/env python3
"""Mutation testing of the reference's rule modules against the conformance suite, with a score.

Every mutant of ``aidememo_ref/_state.py``, ``_ledger.py``, ``_commands.py``, ``_reads.py`` and
``_visibility.py`` must fail the suite run against the embedded reference (the checks in
``conformance/profiles/aidememo/checks``, stopping at the first failure; a check reading WARN,
a SHOULD broken, counts too, as the unmutated reference reads PASS throughout), or be listed in
``docs/mutation-equivalents.toml`` with the reason no request can tell it from the original. A
survivor that is neither is a rule no check reads: write the check (and a kill-matrix variant).

    pip install -e '.[mutation]'
    python scripts/mutation.py                         # all five modules (hours: ~1000 mutants)
    python scripts/mutation.py --module _visibility    # one module
    python scripts/mutation.py --workdir /tmp/mut      # keep the session: rerun to resume it
    python scripts/mutation.py --workdir /tmp/mut --recheck   # after adding checks: rerun the survivors
    AIDEMEMO_CAPABILITIES=large-projects python scripts/mutation.py --module _reads   # with the slow tier

The snapshot and search bound of 10,000 resources (``_reads.MAX_SNAPSHOT_RESOURCES`` and the
comparison in ``rank``) is read only by AM-EDGE-5, a check of the ``large-projects`` tier, which no
run claims unless told (10,001 writes); no other check fills a project near the bound. Its mutants
(the bound one above or below, ``>`` as ``>=``, ``==`` or ``is``) are killed with the tier claimed
(``tests/suite/test_large_projects.py`` applies them).

The tool is cosmic-ray, because its test command is any command line: it writes each mutant into
the module's file on disk and runs the command, so the suite's own pytest process, the embedded
reference it starts and the plugin's loading all meet the mutant as they would a real change.
mutmut 3 instead runs pytest itself, in its own process over the ``mutants/`` copy it makes, and
switches mutants with an environment variable its instrumented functions read, which a run of
the kit (its plugin, profile and embedded target loaded by their own import paths) does not go
through. cosmic-ray mutates in place, so this script works on a copy of the tree (``--workdir``,
default a temporary directory) and never touches the checkout.

A mutant inside an annotation is equivalent by construction (every rule module starts with
``from __future__ import annotations``, so no annotation is evaluated) and is counted as such
without a listing, and without a suite run (a third of ``_reads``' mutants are the ``|`` of an
``int | None``); every other equivalent is listed, keyed by module, function, operator and
occurrence, with its reason.

A mutant that stops the suite at collection, before any check ran, is counted as ``broken``
(cosmic-ray also mutates a signature's bare ``*``, which makes no valid module), not as killed.

Prints, per module and in total, mutants killed, survived and not testable, and the score
``killed / (killed + survivors not explained as equivalent)``; then every unexplained survivor
with its diff. Exit 0 when none is left, 1 when some are, 2 when the run cannot start (say why).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("_state", "_ledger", "_commands", "_reads", "_visibility")
EQUIVALENTS = ROOT / "docs" / "mutation-equivalents.toml"
CHECKS = Path("conformance") / "profiles" / "aidememo" / "checks"
ANNOTATION_SKIP = "inside an annotation, which the module never evaluates: not run"
_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", "*.sqlite*", "aidememo-report*", "mutants",
                                 ".mypy_cache", ".hypothesis", "*.egg-info")


@dataclass(frozen=True, slots=True)
class Mutant:
    module: str  # aidememo_ref/_state.py
    function: str  # the definition the mutation sits in
    operator: str
    occurrence: int
    line: int
    outcome: str  # killed, survived, or why it was not tested
    diff: str

    column: int = 0

    @property
    def key(self) -> tuple[str, str, str, int]:
        return self.module, self.function, self.operator, self.occurrence


Span = tuple[tuple[int, int], tuple[int, int]]


def annotation_spans(source: str) -> list[Span]:
    """Where the annotations of ``source`` are ((line, column) to (line, column)), if none of
    them is evaluated (the module has ``from __future__ import annotations``); else none."""
    tree = ast.parse(source)
    lazy = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not lazy:
        return []
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)) for a in found]


def in_annotation(mutant: Mutant, spans: list[Span]) -> bool:
    at = (mutant.line, mutant.column)
    return any(start <= at < end for start, end in spans)


def _cosmic_ray(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cosmic_ray.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, check=False)


def _config(work: Path, tree: Path, module: str, timeout: float, seed: int) -> Path:
    checks = tree / CHECKS
    report = work / "report"
    command = shlex.join([sys.executable, str(Path(__file__).resolve()), "--judge", str(report), "-p",
                          "conformance.plugin", "-p", "no:cacheprovider", "-p", "no:unraisableexception", "-q",
                          "--tb=no", "-x", "--rootdir", str(checks), str(checks), f"--aidememo-report-dir={report}",
                          f"--aidememo-seed={seed}"])
    config = work / f"{module}.toml"
    config.write_text(f'[cosmic-ray]\nmodule-path = {json.dumps(str(tree / "aidememo_ref" / f"{module}.py"))}\n'
                      f"timeout = {timeout}\nexcluded-modules = []\ntest-command = {json.dumps(command)}\n\n"
                      '[cosmic-ray.distributor]\nname = "local"\n', "utf-8")
    return config


def _skip_annotations(session: Path, source: Path) -> int:
    """Record the session's pending mutants inside an annotation of ``source`` as skipped (no
    suite run can tell them from the original); how many."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(source.read_text("utf-8"))
    skipped = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            at = tuple(item.mutations[0].start_pos)
            if any(start <= at < end for start, end in spans):
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=ANNOTATION_SKIP))
                skipped += 1
    return skipped


def _mutants(session: Path, env: dict[str, str], cwd: Path, tree: Path) -> list[Mutant]:
    dump = _cosmic_ray("dump", str(session), env=env, cwd=cwd)
    found = []
    for line in dump.stdout.splitlines():
        item, result = json.loads(line)
        spec = item["mutations"][0]
        if result is None:
            outcome, diff = "pending", ""
        else:
            outcome = result.get("test_outcome") or result["worker_outcome"]
            diff = result.get("diff") or ""
            if outcome == "killed" and _unimportable(result.get("output") or ""):
                outcome = "broken"  # no check ran: the mutant is no valid module (a `*` made a product)
        found.append(Mutant(module=str(Path(spec["module_path"]).relative_to(tree)),
                            function=spec.get("definition_name") or "", operator=spec["operator_name"],
                            occurrence=int(spec["occurrence"]), line=int(spec["start_pos"][0]), outcome=outcome,
                            diff=diff, column=int(spec["start_pos"][1])))
    return found


def _unimportable(output: str) -> bool:
    """Whether a run stopped at collection, before any check ran (pytest's summary counts only errors)."""
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    return " error" in summary and not any(word in summary for word in ("passed", "failed", "skipped"))


def load_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[str, str, str, int], str]:
    """(module, function, operator, occurrence) -> why the mutant is equivalent."""
    data = tomllib.loads(path.read_text("utf-8")) if path.exists() else {}
    return {(e["module"], e["function"], e["operator"], int(e["occurrence"])): e["reason"]
            for e in data.get("equivalent", [])}


def _recheck(session: Path, config: Path, env: dict[str, str], tree: Path) -> None:
    """Run the session's unexplained survivors again against the checks as they are now (copied
    into the tree first): a check written for a survivor replaces its result."""
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db

    settings = tomllib.loads(config.read_text("utf-8"))["cosmic-ray"]
    for part in ("conformance",):  # the checks and the registry; the rule modules stay the session's
        shutil.rmtree(tree / part)
        shutil.copytree(ROOT / part, tree / part, ignore=_IGNORE)
    equivalents, saved, cwd = load_equivalents(), dict(os.environ), Path.cwd()
    os.environ.update(env)  # cosmic-ray runs the test command with this process's environment and folder:
    os.chdir(tree)  # from the checkout, python -m pytest would import the checkout's modules first
    try:
        with use_db(str(session), WorkDB.Mode.open) as db:
            for item, result in db.completed_work_items:
                spec = item.mutations[0]
                mutant = Mutant(module=str(Path(spec.module_path).relative_to(tree)), function=spec.definition_name or "",
                                operator=spec.operator_name, occurrence=spec.occurrence, line=spec.start_pos[0],
                                outcome=str(result.test_outcome), diff="", column=spec.start_pos[1])
                spans = annotation_spans((tree / mutant.module).read_text("utf-8"))
                if result.test_outcome == "survived" and mutant.key not in equivalents and not in_annotation(
                        mutant, spans):
                    print(f"rechecking {mutant.module}:{mutant.line} {mutant.operator}", flush=True)
                    db.set_result(item.job_id, mutate_and_test(item.mutations, settings["test-command"],
                                                               settings["timeout"]))
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def _restore(work: Path, tree: Path, module: str) -> Path:
    """The module's file in the tree, as the session began.

    cosmic-ray restores the module after each mutant; a run stopped mid-mutant leaves it mutated,
    so the module as the session began is kept and put back before anything runs (the baseline too)."""
    source, pristine = tree / "aidememo_ref" / f"{module}.py", work / "pristine" / f"{module}.py"
    if pristine.exists():
        shutil.copyfile(pristine, source)
    else:
        pristine.parent.mkdir(exist_ok=True)
        shutil.copyfile(source, pristine)
    return source


def _run_module(module: str, work: Path, tree: Path, env: dict[str, str], timeout: float, seed: int,
                recheck: bool = False, resume: bool = True) -> list[Mutant]:
    config, session = _config(work, tree, module, timeout, seed), work / f"{module}.sqlite"
    source = _restore(work, tree, module)
    if recheck and session.exists():
        _recheck(session, config, env, tree)
    if not session.exists():
        done = _cosmic_ray("init", str(config), str(session), env=env, cwd=tree)
        if done.returncode != 0:
            raise SystemExit(f"mutation: cosmic-ray init failed for {module}: {done.stderr.strip()[-300:]}")
    if resume:
        _skip_annotations(session, source)
        print(f"{module}: running the pending mutants (the session {session} resumes if interrupted)", flush=True)
        done = _cosmic_ray("exec", str(config), str(session), env=env, cwd=tree)
        if done.returncode != 0:
            raise SystemExit(f"mutation: cosmic-ray exec failed for {module}: {done.stderr.strip()[-300:]}")
    return _mutants(session, env, tree, tree)


def _baseline(tree: Path, work: Path, env: dict[str, str], timeout: float, seed: int) -> None:
    config = _config(work, tree, MODULES[0], timeout, seed)
    done = _cosmic_ray("baseline", str(config), env=env, cwd=tree)
    if done.returncode != 0:
        raise SystemExit("mutation: the unmutated reference fails the suite, so no mutant can be judged: "
                         + (done.stdout + done.stderr).strip()[-300:])


def report(mutants: list[Mutant], equivalents: dict[tuple[str, str, str, int], str],
           spans: dict[str, list[Span]] | None = None) -> tuple[str, int]:
    """The printed summary and the number of unexplained survivors (``spans``: each module's
    annotations, read from the checkout when not given)."""
    spans = spans if spans is not None else {
        m: annotation_spans((ROOT / m).read_text("utf-8")) for m in {mutant.module for mutant in mutants}}
    lines, unexplained = [], []
    by_module: dict[str, Counter[str]] = {}
    for mutant in mutants:
        outcome = mutant.outcome
        if outcome in ("survived", "skipped") and in_annotation(mutant, spans[mutant.module]):
            outcome = "annotation"
        elif outcome == "survived" and mutant.key in equivalents:
            outcome = "equivalent"
        by_module.setdefault(mutant.module, Counter())[outcome] += 1
        if outcome == "survived":
            unexplained.append(mutant)
    total: Counter[str] = sum(by_module.values(), Counter())
    for name, counts in [*sorted(by_module.items()), ("total", total)]:
        judged = counts["killed"] + counts["survived"]
        score = f"{100 * counts['killed'] / judged:.1f}%" if judged else "n/a"
        others = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("killed", "survived"))
        lines.append(f"{name:<28} score {score:>6}  killed {counts['killed']}, survived {counts['survived']}"
                     f"{', ' + others if others else ''}")
    for mutant in unexplained:
        lines.append(f"\nSURVIVED {mutant.module}:{mutant.line} {mutant.function} {mutant.operator} "
                     f"occurrence {mutant.occurrence}\n{mutant.diff.strip()}")
    return "\n".join(lines), len(unexplained)


def judge(report: Path, pytest_args: list[str]) -> int:
    """The test command cosmic-ray runs for each mutant: the suite, then its verdicts.

    Non-zero when the suite fails, or when a check reads WARN: the unmutated reference reads
    PASS on every check it is scored on (the baseline shows it), so a WARN is the suite seeing the
    mutant, as a SHOULD it breaks (a mailbox ``before_seq`` past 2^63-1 answered 200, AM-MBOX-4)."""
    done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], check=False)
    if done.returncode != 0:
        return done.returncode
    records = json.loads((report / "results.json").read_text("utf-8"))["records"]
    warned = [record["nodeid"] for record in records if record["verdict"] == "WARN"]
    if warned:
        print(f"{len(warned)} checks read WARN, first {warned[0]}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--judge"] and len(args_list) > 1:  # cosmic-ray's test command (``_config``)
        return judge(Path(args_list[1]), args_list[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=MODULES, help="a rule module (repeatable; default all)")
    parser.add_argument("--workdir", type=Path, help="keep the tree copy and sessions here (a rerun resumes)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one suite run may take (default 120)")
    parser.add_argument("--seed", type=int, default=1, help="the suite's seed (default 1)")
    parser.add_argument("--no-resume", dest="resume", action="store_false",
                        help="run no pending mutant: report a kept session as far as it got")
    parser.add_argument("--recheck", action="store_true",
                        help="first run a kept session's unexplained survivors again against the current checks")
    args = parser.parse_args(args_list)
    if importlib.util.find_spec("cosmic_ray") is None:
        print("mutation: cosmic-ray is not installed: pip install -e '.[mutation]'", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="aidememo-mutation-"))
    work = work.resolve()
    tree = work / "tree"
    if not tree.exists():
        shutil.copytree(ROOT, tree, ignore=_IGNORE)
    # The copy, not the installed checkout, is what the suite and its embedded reference import.
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        for module in MODULES:
            _restore(work, tree, module)
        _baseline(tree, work, env, args.timeout, args.seed)
        mutants = [m for module in args.module or MODULES
                   for m in _run_module(module, work, tree, env, args.timeout, args.seed, args.recheck, args.resume)]
    except SystemExit as stop:
        print(stop, file=sys.stderr)
        return 2
    # Annotations as the mutated copy has them (the checkout may have moved on since a resumed run began).
    spans = {m: annotation_spans((tree / m).read_text("utf-8")) for m in {mutant.module for mutant in mutants}}
    text, unexplained = report(mutants, load_equivalents(), spans)
    print(text)
    pending = sum(m.outcome == "pending" for m in mutants)
    if pending:
        print(f"{pending} mutants not run yet: rerun with --workdir {work} to resume")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
