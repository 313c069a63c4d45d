"""XMemo replay files: one failure, everything needed to run it again, and its exports.

A replay file (``FORMAT``) is JSON: the seed, the target (embedded, with the factory when it is a
planted variant, recorded but never imported), the plan, the schedule the embedded scheduler
followed, the history and the finding. Beside it go an HTML timeline and a pytest file that calls
``reproduce``.
"""

from __future__ import annotations

import json
from pathlib import Path

from refkit.files import write_atomic
from refkit.jsonvalue import loads
from simulations.errors import SimulationError
from simulations.plan import Plan
from simulations.targets import load_factory, recorded_target, unnamed_code
from simulations.xmemo.campaign import XMemoRun, rerun
from simulations.xmemo.model import describe_operation
from simulations.xmemo.targets import reference_factory

__all__ = ["FORMAT", "export_failure", "reproduce"]

FORMAT = "aidememo-sim-xmemo-replay/1"


def export_failure(run: XMemoRun, out: Path, *, factory: str | None = None) -> dict[str, Path]:
    """Write the replay file, an HTML timeline and a pytest file for ``run``'s violation."""
    from simulations.linearizability.timeline import write_timeline

    out.mkdir(parents=True, exist_ok=True)
    stem = f"xmemo-race-seed-{run.seed}"
    finding = run.finding
    doc = {
        "format": FORMAT, "seed": run.seed, "target": {"kind": "embedded", "factory": factory},
        "plan": run.plan.to_json(), "schedule": [list(d) for d in run.decisions],
        "history": [op.to_json() for op in run.history],
        "finding": None if finding is None else {"kind": finding.kind, "requirement": finding.requirement,
                                                 "witness": list(finding.witness), "explanation": finding.explanation},
    }
    replay = out / f"{stem}.json"
    write_atomic(replay, json.dumps(doc, indent=1) + "\n")
    timeline = out / f"{stem}.html"
    write_timeline(timeline, run.history, title=f"XMemo race, seed {run.seed}",
                   highlight=finding.witness if finding else (), explanation=finding.explanation if finding else "",
                   actor_names={i: f"{agent}/{i % 2}" for i, agent in enumerate(run.plan.workers)},
                   describe=describe_operation)
    test = out / f"test_{stem.replace('-', '_')}.py"
    write_atomic(test, (
        f'"""XMemo race found by the simulator (seed {run.seed}); passes once the bug is fixed."""\n\n'
        "from pathlib import Path\n\n"
        "from simulations.xmemo.replay import reproduce\n\n\n"
        f"def test_xmemo_race_seed_{run.seed}_does_not_reproduce() -> None:\n"
        f"    assert reproduce(Path(__file__).with_name({replay.name!r}), factory={factory!r}) == 0\n"))
    return {"replay file": replay, "timeline": timeline, "pytest file": test}


def reproduce(path: Path, times: int = 1, factory: str | None = None) -> int:
    """Run a replay file ``times`` times; how many runs showed a violation of the recorded kind.

    ``factory``: the XMemo reference factory (FILE.py:NAME) to run against. The file's own is
    never imported (a replay file is data, shared with bug reports): one it records must be named.

    Raises:
        SimulationError: when the file cannot be read, is not an XMemo replay file, or records a
            factory not named here.
    """
    try:
        doc = loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise SimulationError(f"cannot read replay file {path}: {str(exc).splitlines()[0][:200]}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SimulationError(f"{path} is not an XMemo replay file ({FORMAT})")
    try:
        recorded = recorded_target(doc.get("target")).get("factory")
        plan = Plan.from_json(doc.get("plan", {}))
    except SimulationError as exc:
        raise SimulationError(f"{path}: {exc}") from exc
    if recorded and not factory:
        raise unnamed_code(path, [("--ledger", recorded)])
    if not isinstance(doc.get("seed"), int) or not isinstance(doc.get("schedule") or [], list):
        raise SimulationError(f"{path}: 'seed' is not an integer or 'schedule' is not a list")
    kind = (doc.get("finding") or {}).get("kind") if isinstance(doc.get("finding") or {}, dict) else None
    run_with = load_factory(factory) if factory else reference_factory
    hits = 0
    for _ in range(times):
        trial = rerun(plan, doc["seed"], run_with, doc.get("schedule") or ())
        hits += any(kind is None or f.kind == kind for f in trial.findings)
    return hits
