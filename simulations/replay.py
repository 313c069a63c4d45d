"""Replay files: one failure, everything needed to run it again, and its exports.

A replay file is JSON: the seed, the target (embedded, with the ledger factory when it is a
planted variant, or a URL), the plan (setup is implied; batches of resolved requests), the
schedule the embedded scheduler followed, the recorded history, and the verdict with its
explanation. ``aidememo-sim replay FILE`` (in ``cli.py``) runs the plan again through
``reproduce``. Beside it go a timeline (HTML), a standalone pytest file and a curl script.
Tokens are never written: a URL replay takes them again.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from simulations.campaign import RunResult, rerun, rerun_over_http
from simulations.errors import SimulationError
from simulations.history import Header, Operation, dump_history
from simulations.ledger import LEDGER
from simulations.plan import READER, SESSION_ID, SOURCE, Plan, with_run_placeholder
from simulations.targets import HttpTarget, load_factory
from simulations.timeline import write_timeline

__all__ = ["FORMAT", "export_failure", "load_replay", "reproduce"]

FORMAT = "aidememo-sim-replay/1"


def _replay_doc(result: RunResult, *, target: str, url: str | None, factory: str | None) -> dict[str, Any]:
    finding = result.finding
    return {
        "format": FORMAT,
        "seed": result.seed,
        "target": {"kind": target, "factory": factory, "url": url},
        "plan": result.plan.to_json(),
        "schedule": [list(d) for d in result.decisions],
        "history": [op.to_json() for op in result.history],
        "verdict": result.verdict.value,
        "finding": None if finding is None else {
            "kind": finding.kind, "witness": list(finding.witness), "explanation": finding.explanation},
    }


def load_replay(path: Path) -> dict[str, Any]:
    """Read and validate a replay file.

    Raises:
        SimulationError: when the file is missing, not JSON, or not a replay file.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SimulationError(f"cannot read replay file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise SimulationError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SimulationError(f"{path} is not an {FORMAT} file")
    for key in ("seed", "target", "plan", "schedule"):
        if key not in doc:
            raise SimulationError(f"{path}: missing {key!r}")
    try:
        Plan.from_json(doc["plan"])
    except SimulationError as exc:
        raise SimulationError(f"{path}: {exc}") from exc
    return doc


def reproduce(doc: dict[str, Any], http_target: HttpTarget | None = None) -> RunResult:
    """Run a replay document once; returns the RunResult (``finding`` set when it failed)."""
    plan = Plan.from_json(doc["plan"])
    target = doc["target"]
    if target.get("kind") == "url":
        if http_target is None:
            raise SimulationError("this failure was found over a URL; give --url, --project and --token again")
        return rerun_over_http(plan, int(doc["seed"]), http_target)
    return rerun(plan, int(doc["seed"]), load_factory(target.get("factory")), doc["schedule"])


# -- exports ----------------------------------------------------------------------------------


_PYTEST_TEMPLATE = '''"""Regression test exported by aidememo-sim from a recorded race (seed {seed}).

It fails while the race is present. Run: pytest {name}
"""

import json

from simulations.replay import reproduce

REPLAY = json.loads({doc!r})


def test_race_seed_{seed}_does_not_reproduce():
    result = reproduce(REPLAY)
    assert result.finding is None, result.finding.explanation
'''


def _pytest_text(doc: dict[str, Any], name: str) -> str:
    slim = {k: doc[k] for k in ("format", "seed", "target", "plan", "schedule")}
    return _PYTEST_TEMPLATE.format(seed=doc["seed"], name=name, doc=json.dumps(slim, sort_keys=True))


def _curl_text(doc: dict[str, Any]) -> str:
    plan = Plan.from_json(doc["plan"])
    lines = [
        "#!/bin/sh",
        f"# Exported by aidememo-sim (seed {doc['seed']}): the same requests, batch by batch; each",
        "# batch is launched at once in the background. Set BASE_URL, PROJECT and one TOKEN_<ACTOR>",
        "# per actor (dashes as underscores). Curl cannot force the interleaving the embedded",
        "# scheduler chose, so over a network the race may need several runs to show.",
        "set -u",
        ': "${BASE_URL:?}" "${PROJECT:?}"',
        f"RUN=${{RUN:-$(date +%s)}}  # fresh ids per run: {SESSION_ID}-r becomes {SESSION_ID}-$RUN",
    ]

    def token(actor: str) -> str:
        return "$TOKEN_" + actor.replace("-", "_").upper()

    def curl(actor: str, method: str, path: str, body: Any) -> str:
        path = path.replace("project-sim", "$PROJECT").replace("-r-", "-$RUN-")
        cmd = f'curl -sS -X {method} "$BASE_URL{path}" -H "authorization: Bearer {token(actor)}"'
        if body is not None:
            text = with_run_placeholder(json.dumps(body, sort_keys=True))
            cmd += f' -H "content-type: application/json" --data "$(echo {shlex.quote(text)} | sed "s/@RUN@/$RUN/g")"'
        return cmd

    base = "/v1/projects/project-sim"
    lines.append("# setup: one session, one fact per actor")
    lines.append(curl(plan.actors[0], "POST", f"{base}/sessions", {"command_id": "r-session", "payload": {
        "session_id": f"{SESSION_ID}-r", "source_id": SOURCE, "topic": "race simulation"}}))
    for actor in plan.actors:
        lines.append(curl(actor, "POST", f"{base}/facts", {"command_id": f"r-fact-{actor}", "payload": {
            "fact_id": f"fact-{actor}-r", "session_id": f"{SESSION_ID}-r", "content": f"result written by {actor}"}}))
    for n, batch in enumerate(plan.batches):
        lines.append(f"# batch {n}" + ("" if batch.clock_ms is None else f" (the embedded clock was {batch.clock_ms})"))
        for op in batch.ops:
            actor = str(op.input["actor"])
            lines.append(curl(actor if actor != READER else READER, op.method, op.path, op.body) + " &")
        lines.append("wait; echo")
    return "\n".join(lines) + "\n"


def export_failure(result: RunResult, out_dir: Path, *, target: str, url: str | None = None,
                   factory: str | None = None) -> dict[str, Path]:
    """Write the replay file, timeline, pytest file, curl script and history; returns their paths.

    Raises:
        SimulationError: when the files cannot be written.
    """
    doc = _replay_doc(result, target=target, url=url, factory=factory)
    stem = f"race-seed-{result.seed}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        replay_path = out_dir / f"{stem}.json"
        replay_path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        test_path = out_dir / f"test_{stem.replace('-', '_')}.py"
        test_path.write_text(_pytest_text(doc, test_path.name), encoding="utf-8")
        history_path = out_dir / f"{stem}.jsonl"
        with history_path.open("w", encoding="utf-8") as handle:
            dump_history(result.history, handle, Header(model="ledger"))
        curl_path = out_dir / f"{stem}.sh"
        curl_path.write_text(_curl_text(doc), encoding="utf-8")
        curl_path.chmod(0o755)
    except OSError as exc:
        raise SimulationError(f"cannot write the failure files to {out_dir}: {exc.strerror}") from exc
    history: list[Operation] = list(result.history)
    html_path = out_dir / f"{stem}.html"
    names = {w: f"{actor} (worker {w})" for w, actor in enumerate(result.plan.workers)}
    write_timeline(
        html_path, history, title=f"aidememo-sim: seed {result.seed}, {result.verdict.value}",
        highlight=result.finding.witness if result.finding else (),
        explanation=result.finding.explanation if result.finding else "",
        actor_names=names, describe=LEDGER.describe_operation,
    )
    return {"replay file": replay_path, "timeline": html_path, "pytest file": test_path, "curl script": curl_path,
            "history (aidememo-sim check --model ledger)": history_path}
