"""``aidememo-conformance diff``: the target and the kit's reference, fed the same stream, compared answer by answer.

    aidememo-conformance diff [--config target.toml] [--seed N] [--budget S] [--steps N]
                              [--departures FILE] [--replay CASE_JSON] [run's target flags]

The target is the one ``run`` would test (same target file, provisioning and redaction); the
reference is a fresh embedded one. ``steps`` draws the stream, ``episode`` sends it and
``compare`` says what may differ; ``runner`` shrinks the first divergence; ``script`` writes the
shell script beside its case file; ``html`` renders ``diff.html``. Exit 0: no
divergence; 1: a divergence; 2: bad input.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from conformance.errors import ConfigError, ConformanceError
from conformance.http import health_answer
from conformance.profiles.aidememo.diff.compare import Departures
from conformance.profiles.aidememo.diff.html import render_diff_html
from conformance.profiles.aidememo.diff.runner import Divergence, Result, Sides, read_case, replay, run, write_case
from conformance.profiles.aidememo.diff.script import case_record
from conformance.profiles.aidememo.diff.sides import ReferenceSide, TargetSide
from conformance.profiles.aidememo.settings import AideMemoSettings, describe
from conformance.reports import provenance
from conformance.reproduction.script import render_script
from conformance.reproduction.suite import ReplayTarget, target_path
from refkit.files import write_atomic

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_STEPS", "main"]

DEFAULT_BUDGET_S = 60.0
DEFAULT_STEPS = 50_000  # above what a budget reaches on an embedded target (`python bench/diff.py` gives the rate): the budget ends a run
TIME_NOTE_CLOCK = ("time: both test clocks move together (clock steps); timestamps are compared by type, "
                   "a lease's length by value")
TIME_NOTE_NONE = ("time: the target serves no test clock, so no step moves time (lease expiry is not exercised); "
                  "timestamps are compared by type, a lease's length by value")


def _departures(explicit: str | None, target_file: Any) -> Departures:
    if explicit is not None:
        if not Path(explicit).is_file():
            raise ConfigError(f"--departures {explicit}: no such file")
        return Departures.load(Path(explicit))
    beside = Path(target_file.path).parent / "departures.toml" if target_file is not None else None
    return Departures.load(beside if beside is not None and beside.is_file() else None)


def _quiet(value: Any, keep: str) -> Any:
    """``value`` with fingerprints shown as ``<fingerprint>`` unless the difference is one: they hash
    the episode's project id, so they would make two replays' output differ where nothing else does."""
    if isinstance(value, dict):
        return {k: "<fingerprint>" if k == "fingerprint" and k != keep and isinstance(v, str) else _quiet(v, keep)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_quiet(item, keep) for item in value]
    return value


def _show(value: Any, keep: str = "") -> str:
    text = json.dumps(_quiet(value, keep), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 300 else text[:297] + "..."


def _print_divergence(out: TextIO, index: int, divergence: Divergence, replay_command: str | None,
                      script: Path | None = None, reproduce: str | None = None) -> None:
    outcome = divergence.outcome
    assert outcome.field is not None
    where, ours, theirs = outcome.field
    out.write(f"DIVERGENCE {index}: {outcome.step.route} ({outcome.step.note}), step {len(divergence.steps)} of "
              f"{len(divergence.steps)}{'' if divergence.shrunk else ' (the budget ended before shrinking did)'}\n")
    out.write(f"  first difference: {where}: target {_show(ours)}, reference {_show(theirs)}\n")
    out.write(f"  requirements: {', '.join(divergence.requirements) or '(none mapped)'}\n")
    for number, step in enumerate(divergence.steps, 1):
        query = f"?{step.query}" if step.query else ""
        out.write(f"  {number:>3}. {step.actor:<13} {step.method} {step.path}{query}  [{step.note}]\n")
    keep = where.rsplit(".", 1)[-1]
    out.write(f"  target:    {_show(outcome.target.to_dict(), keep)}\n")
    out.write(f"  reference: {_show(outcome.reference.to_dict(), keep)}\n")
    if replay_command:
        out.write(f"  replay: {replay_command}\n")
    if script is not None:
        out.write(f"  replay script (no kit needed): sh {shlex.quote(str(script))}\n")
    if reproduce is not None:
        out.write(f"  reproduce: {reproduce}\n")
        out.write("  (the script and reproduce exit 1 while the target diverges, 0 once it does not, 2 when they "
                  "cannot run)\n")


def _replay_command(argv_base: list[str], case: Path) -> str:
    return " ".join(shlex.quote(part) for part in [*argv_base, "--replay", str(case)])


def _replay_target(settings: Any) -> ReplayTarget:
    description = describe(settings, None)
    return ReplayTarget(url=description.url, templates=description.templates, workdir=os.getcwd(),
                        credential_prefix=description.credential_prefix, hint=description.replay_hint,
                        config=target_path(settings.target_file.path if settings.target_file else None))


def _report(result: Result, report_dir: Path, argv_base: list[str], header: dict[str, Any],
            target: ReplayTarget) -> list[tuple[str, Path, str]]:
    """Write the case files, their scripts, ``diff.json`` and ``diff.html``; each divergence's replay
    command and script. ``header`` is the run's target, budget and notes."""
    report_dir.mkdir(parents=True, exist_ok=True)
    commands = []
    cases = []
    for index, divergence in enumerate(result.divergences, 1):
        case = report_dir / f"divergence-{index}.json"
        write_case(case, divergence, result.seed)
        script, record = case.with_suffix(".sh"), case.with_suffix(".reproduction.json")
        repro = case_record(divergence, target)
        write_atomic(record, repro.dumps())
        write_atomic(script, render_script(repro), mode=0o755)
        commands.append((_replay_command(argv_base, case), script, target.reproduce_command(repro, record)))
        cases.append({**divergence.to_dict(), "case": str(case), "replay": commands[-1][0], "script": str(script),
                      "reproduction": str(record), "reproduce": commands[-1][2]})
    summary = {**provenance(header.get("health")), "seed": result.seed, "target": header["target"], "budget_s": header["budget_s"],
               "max_steps": header["max_steps"], "steps": result.steps, "episodes": result.episodes,
               "seconds": round(result.seconds, 2), "found_at_s": None if result.found_at_s is None
               else round(result.found_at_s, 2), "routes": dict(sorted(result.routes.items())),
               "coverage": result.coverage.to_dict(),
               "tolerated": [{"reason": reason, "count": count} for reason, count in sorted(result.tolerated.items())],
               "divergences": cases, "notes": header["notes"]}
    write_atomic(report_dir / "diff.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    write_atomic(report_dir / "diff.html", render_diff_html(summary))
    _remove_stale(report_dir, len(result.divergences))
    return commands


_CASE_FILE = re.compile(r"divergence-(\d+)\.(json|sh|reproduction\.json)")


def _remove_stale(report_dir: Path, written: int) -> None:
    """Remove the case files of an earlier run this one did not write (``divergence-N.*`` past
    its count), so a clean report never sits beside old divergences."""
    for path in report_dir.iterdir():
        found = _CASE_FILE.fullmatch(path.name)
        if found and int(found[1]) > written:
            path.unlink(missing_ok=True)


def main(args: Any, settings: Any, argv_base: list[str], out: TextIO | None = None) -> int:
    """Run (or replay) a differential run; the exit status of ``diff``."""
    out = out or sys.stdout
    begun = time.monotonic()  # the budget counts the target's start and provisioning too
    from conformance.profile import REPORT_DIR, SEED

    view = AideMemoSettings.of(settings)
    try:
        departures = _departures(args.departures, settings.target_file)
        steps = read_case(Path(args.replay)) if args.replay else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if args.budget is not None and args.budget <= 0 or args.steps is not None and args.steps <= 0:
        raise ConfigError("--budget and --steps must be positive")
    target = TargetSide.of(view)
    reference = ReferenceSide()
    try:
        sides = Sides(target, reference, departures)
        notes = [TIME_NOTE_CLOCK if target.clock else TIME_NOTE_NONE,
                 "server-chosen epochs are matched by first appearance; error messages are not compared"]
        if steps is not None:
            return _replay(sides, steps, out)
        seed = settings[SEED] if settings[SEED] is not None else random.randrange(2**32)
        out.write(f"aidememo-conformance diff: seed {seed}, target {view.url or 'embedded'}, namespace {sides.tag}\n")
        out.write(f"  {notes[0]}\n")
        header: dict[str, Any] = {"target": view.url or "embedded", "health": health_answer(target.wire), "budget_s": args.budget or DEFAULT_BUDGET_S,
                                  "max_steps": int(args.steps or DEFAULT_STEPS), "notes": notes}
        result = run(sides, seed=seed, budget_s=header["budget_s"] - (time.monotonic() - begun),
                     max_steps=header["max_steps"],
                     clock=target.clock, mcp=_mcp_claimed(view, target), progress=lambda line: print(f"  {line}", file=out))
        report_dir = Path(settings[REPORT_DIR])
        commands = _report(result, report_dir, argv_base, header, _replay_target(settings))
    finally:
        target.close()
        reference.close()
    out.write(f"ran {result.steps} steps in {result.episodes} episodes ({result.seconds:.1f} s), "
              f"{len(result.routes)} routes: {len(result.divergences)} divergence(s), "
              f"{sum(result.tolerated.values())} tolerated\n")
    coverage = result.coverage
    out.write(f"  state coverage: {len(coverage.pairs)} (route, status, error code, record state) pairs, "
              f"{len(coverage.states())} (route, record state) pairs, {len(coverage.aims)} aims tried\n")
    for reason, count in sorted(result.tolerated.items()):
        out.write(f"  tolerated {count}x: {reason}\n")
    for index, (divergence, (command, script, reproduce)) in enumerate(zip(result.divergences, commands), 1):
        _print_divergence(out, index, divergence, command, script, reproduce)
    out.write(f"reports: {report_dir / 'diff.html'}  {report_dir / 'diff.json'}\n")
    out.write(f"rerun: {' '.join(shlex.quote(p) for p in argv_base)} --seed {seed}\n")
    return 1 if result.divergences else 0


def _mcp_claimed(view: AideMemoSettings, target: TargetSide) -> bool:
    claim = view.capabilities.get("mcp")
    if claim is not None:
        return claim
    try:
        exchange = target.wire.request(None, "POST", "/v1/projects/capability-probe/mcp", json_body={})
    except ConformanceError:
        return False
    return not (exchange.status in (404, 405) and exchange.error_code() is None)


def _replay(sides: Sides, steps: list[Any], out: TextIO) -> int:
    outcomes = replay(sides, steps)
    last = outcomes[-1] if outcomes else None
    if last is None or not last.diverged:
        out.write(f"replayed {len(outcomes)} of {len(steps)} steps: no divergence\n")
        return 0
    assert last.field is not None
    from conformance.profiles.aidememo.diff.compare import requirements_of

    codes = (last.target.error_code, last.reference.error_code)
    divergence = Divergence(steps[:len(outcomes)], last, len(steps), requirements_of(last.step.route, codes),
                            outcomes[:-1])
    _print_divergence(out, 1, divergence, None)
    return 1
