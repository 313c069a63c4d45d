"""Replay files: one failure, everything needed to run it again, and its exports.

A replay file is JSON: the seed, the target (embedded, with the ledger factory when it is a
planted variant; or a URL, with the target file the run used and the project it ran in), the
plan (setup is implied; batches of resolved requests), the schedule the embedded scheduler
followed, the recorded history, the verdict with its explanation and, for a failure shrunk over
a URL, how often the shrunk case reproduced. ``aidememo-sim replay FILE`` (``commands/replay.py``) runs
the plan again through ``reproduce``: over a URL it is rebased into the target's project with
fresh ids (``replay_target`` finds the target). Beside it go a timeline (HTML), a standalone
pytest file and a curl script (``exports.py``). Tokens are never written.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from refkit.files import open_fresh, write_atomic
from refkit.jsonvalue import loads
from simulations.campaign import RunResult, rerun, rerun_over_http
from simulations.errors import SimulationError
from conformance.reproduction.script import render_script
from simulations.exports import finding_requirements, pytest_text, race_sentence, reproduction_of
from simulations.linearizability.history import Header, Operation, dump_history
from simulations.ledger import LEDGER
from simulations.plan import Plan
from simulations.targets import (HttpTarget, load_factory, named_words, recorded_target, target_from_config,
                                 token_variable, unnamed_code)
from simulations.linearizability.timeline import write_timeline

__all__ = ["CONFIG_ENV", "FORMAT", "export_failure", "finding_lines", "load_replay", "replay_target", "reproduce",
           "reproduce_lines"]

FORMAT = "aidememo-sim-replay/1"
CONFIG_ENV = "AIDEMEMO_SIM_CONFIG"  # a target file to replay against, instead of the recorded one
_FLAGS = {"factory": "--ledger", "config": "--config"}  # how ``replay`` names what a replay file records


def _replay_doc(result: RunResult, *, target: str, url: str | None, factory: str | None, config: Path | None,
                reproduction: tuple[int, int] | None) -> dict[str, Any]:
    finding = result.finding
    doc: dict[str, Any] = {
        "format": FORMAT,
        "seed": result.seed,
        "target": {"kind": target, "factory": factory, "url": url,
                   "config": None if config is None else str(config.resolve()),
                   "project": None if target != "url" else result.plan.project},
        "plan": result.plan.to_json(),
        "schedule": [list(d) for d in result.decisions],
        "history": [op.to_json() for op in result.history],
        "verdict": result.verdict.value,
        "finding": None if finding is None else {
            "kind": finding.kind, "witness": list(finding.witness), "explanation": finding.explanation,
            "expected": [[index, list(answers)] for index, answers in finding.expected],
            "requirements": list(finding_requirements(finding.kind, [
                str(result.history[i].input.get("op")) for i, _ in finding.expected if i < len(result.history)]))},
    }
    if reproduction is not None:
        doc["reproduction"] = {"reproduced": reproduction[0], "runs": reproduction[1]}
    return doc


def load_replay(path: Path, *, ledger: str | None = None, config: Path | None = None,
                url_given: bool = False) -> dict[str, Any]:
    """Read and validate a replay file, with the factory and target file the command line named
    (``ledger``, ``config``) in place of the ones it records.

    A replay file is data: it is shared with bug reports, so the factory it records (a Python
    file to import) and its target file (whose provisioning command runs) are run only when the
    command line names them. ``url_given``: the command line gives the URL target itself, so a
    recorded target file is not needed; ``AIDEMEMO_SIM_CONFIG`` counts as named.

    Raises:
        SimulationError: when the file is missing, not JSON, not a replay file, or records a
            factory or target file the command line did not name (the message is the command that
            names them).
    """
    try:
        doc = loads(path.read_bytes())
    except OSError as exc:
        raise SimulationError(f"cannot read replay file {path}: {exc.strerror}") from exc
    except ValueError as exc:  # not JSON, not UTF-8, or nested too deep
        raise SimulationError(f"{path} is not JSON ({str(exc).splitlines()[0][:200]})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SimulationError(f"{path} is not an {FORMAT} file")
    for key in ("seed", "target", "plan", "schedule"):
        if key not in doc:
            raise SimulationError(f"{path}: missing {key!r}")
    if not isinstance(doc["seed"], int) or not isinstance(doc["schedule"], list):
        raise SimulationError(f"{path}: 'seed' is not an integer or 'schedule' is not a list")
    try:
        Plan.from_json(doc["plan"])
        target = recorded_target(doc["target"])
    except SimulationError as exc:
        raise SimulationError(f"{path}: {exc}") from exc
    named = {"factory": ledger, "config": None if config is None else str(config)}
    needed = ["factory"]
    if target.get("kind") == "url" and not url_given and not os.environ.get(CONFIG_ENV):
        needed.append("config")
    unnamed = [(_FLAGS[key], target[key]) for key in needed if target.get(key) and not named[key]]
    if unnamed:
        raise unnamed_code(path, unnamed)
    return {**doc, "target": {**target, **named}}


def replay_target(doc: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> HttpTarget | None:
    """Where a replay document runs: None for the embedded reference; for a URL failure, the
    target file ``AIDEMEMO_SIM_CONFIG`` names, else the document's (from a file, the one
    ``load_replay`` was given; either provisions a fresh project with fresh tokens), else ``BASE_URL``, ``PROJECT`` (defaults: the run's) and
    one ``TOKEN_<ACTOR>`` per actor of the plan.

    Raises:
        SimulationError: when none of these gives a target (the message says what to set).
    """
    env = os.environ if environ is None else environ
    target = doc["target"]
    if target.get("kind") != "url":
        return None
    plan = Plan.from_json(doc["plan"])
    config = env.get(CONFIG_ENV) or target.get("config")
    if config:
        http = target_from_config(Path(config), plan.actors)
        if http is None:
            raise SimulationError(f"{config} names the embedded reference; this failure was found over a URL")
        return http
    actors = plan.identities
    missing = [token_variable(a) for a in actors if not env.get(token_variable(a))]
    if missing:
        raise SimulationError(f"this failure was found over {target.get('url')} with --url and --token: give "
                              f"--url, --project and --token again, or set {', '.join(missing)}")
    tokens = {a: env[token_variable(a)] for a in actors}
    return HttpTarget(env.get("BASE_URL") or str(target.get("url")), env.get("PROJECT") or plan.project, tokens)


def reproduce(doc: Mapping[str, Any], http_target: HttpTarget | None = None) -> RunResult:
    """Run a replay document once; returns the RunResult (``finding`` set when it failed).

    A URL failure runs against ``http_target``, or the one ``replay_target`` finds (a target
    file then provisions a project for this call alone: pass one target to repeat in it).

    Raises:
        SimulationError: when the target cannot be found or reached, or the setup fails.
    """
    plan = Plan.from_json(doc["plan"])
    target = doc["target"]
    if target.get("kind") == "url":
        http = http_target if http_target is not None else replay_target(doc)
        assert http is not None
        return rerun_over_http(plan, int(doc["seed"]), http)
    return rerun(plan, int(doc["seed"]), load_factory(target.get("factory")), doc["schedule"])


# -- exports ----------------------------------------------------------------------------------


def _provision_template(config: Path | None) -> str | None:
    if config is None:
        return None
    from conformance.errors import ConfigError
    from conformance.profiles.aidememo.settings import target_settings

    try:
        return target_settings(str(config)).provision_command
    except ConfigError:
        return None  # the run read this file a moment ago; a file changed since gives no template


def export_failure(result: RunResult, out_dir: Path, *, target: str, url: str | None = None,
                   factory: str | None = None, config: Path | None = None,
                   reproduction: tuple[int, int] | None = None) -> dict[str, Path]:
    """Write the replay file, timeline, pytest file, curl script and history; returns their paths.

    ``config``: the target file a URL run used (recorded, so a replay provisions from it again);
    ``reproduction``: (reproduced, runs) of a case shrunk over a URL.

    Raises:
        SimulationError: when the files cannot be written.
    """
    doc = _replay_doc(result, target=target, url=url, factory=factory, config=config, reproduction=reproduction)
    stem = f"race-seed-{result.seed}"
    paths = {"replay file": out_dir / f"{stem}.json", "timeline": out_dir / f"{stem}.html",
             "pytest file": out_dir / f"test_{stem.replace('-', '_')}.py", "curl script": out_dir / f"{stem}.sh",
             "reproduction record": out_dir / f"{stem}.reproduction.json",
             "history (aidememo-sim check --model ledger)": out_dir / f"{stem}.jsonl"}
    repro = reproduction_of(doc, _provision_template(config), os.getcwd())
    replay = " ".join(["aidememo-sim", "replay", str(paths["replay file"]), *named_words(factory, config)])
    commands = (("replay (the same interleaving, judged by the model)", replay),
                ("pytest (fails while the race reproduces)", f"pytest {paths['pytest file']}"),
                ("curl script (exit 1: shown, 3: not met, 2: cannot run)", f"sh {paths['curl script']}"),
                ("the same record from Python", shlex.join(["aidememo-conformance", "reproduce",
                                                            *(["--config", str(config.resolve())] if config else []),
                                                            str(paths["reproduction record"])])))
    _write_exports(paths, doc, result, repro, commands)
    return paths


def _write_exports(paths: Mapping[str, Path], doc: Mapping[str, Any], result: RunResult, repro: Any,
                   commands: Sequence[tuple[str, str]]) -> None:
    """Every file of a failure, written in one place.

    Raises:
        SimulationError: when a file cannot be written.
    """
    try:
        paths["replay file"].parent.mkdir(parents=True, exist_ok=True)
        write_atomic(paths["replay file"], json.dumps(doc, indent=1, sort_keys=True) + "\n")
        write_atomic(paths["pytest file"], pytest_text(doc, paths["pytest file"].name))
        with open_fresh(paths["history (aidememo-sim check --model ledger)"]) as handle:
            dump_history(result.history, handle, Header(model="ledger"))
        write_atomic(paths["reproduction record"], repro.dumps())
        write_atomic(paths["curl script"], render_script(repro), mode=0o755)
    except OSError as exc:
        raise SimulationError(f"cannot write the failure files to {paths['replay file'].parent}: {exc.strerror}") \
            from exc
    history: list[Operation] = list(result.history)
    names = {w: f"{actor} (worker {w})" for w, actor in enumerate(result.plan.workers)}
    finding = doc.get("finding") or {}
    write_timeline(
        paths["timeline"], history, title=f"aidememo-sim: seed {result.seed}, {result.verdict.value}",
        highlight=result.finding.witness if result.finding else (),
        explanation=result.finding.explanation if result.finding else "",
        actor_names=names, describe=LEDGER.describe_operation,
        summary=(f"{race_sentence(doc)} Requirements: {', '.join(finding.get('requirements', [])) or 'none mapped'}."
                 if result.finding else ""),
        commands=commands,
    )


def finding_lines(paths: Mapping[str, Path]) -> list[str]:
    """What a written finding broke, as its run and a hunt print it: the requirement ids and one
    sentence of what the race did (none when the replay file cannot be read back)."""
    try:
        doc = load_replay(paths["replay file"])
    except (KeyError, SimulationError):
        return []
    finding = doc.get("finding") or {}
    return [f"requirements: {', '.join(finding.get('requirements', [])) or 'none mapped'}",
            f"what the race did: {race_sentence(doc)}"]


_MISS = 0.001  # how often a printed ``replay --times N`` may miss a race it reproduced k/n times
_MOST_TIMES = 200


def reproduce_lines(paths: Mapping[str, Path], reproduction: tuple[int, int] | None,
                    replay_words: Sequence[str] = ()) -> list[str]:
    """The lines that tell how to see a finding again, as the one-process run and a hunt print them.

    On the embedded reference, or over a URL when the shrunk case failed every measured rerun,
    one ``replay``. Over a URL a race the network interleaves fails only some reruns: the replay
    is printed with enough ``--times`` that it misses the race about once in a thousand (its
    exit status is 1 when any run fails), beside the check of the recorded history, which gives
    the same verdict every time; a case that failed no measured rerun gets the check alone.
    """
    replay = ["aidememo-sim", "replay", str(paths["replay file"])]
    check = next((f"aidememo-sim check {path} --model ledger" for label, path in paths.items()
                  if label.startswith("history")), None)
    if reproduction is None or reproduction[0] >= reproduction[1] or check is None:
        return [f"reproduce with: {' '.join([*replay, *replay_words])}"]
    reproduced, runs = reproduction
    lines = [f"check what was seen (the same verdict every time): {check}"]
    if reproduced == 0:
        lines.append(f"its replay failed none of {runs} reruns over the URL (a race the network interleaves); "
                     f"to try again: {' '.join([*replay, '--times', str(_MOST_TIMES), *replay_words])}")
        return lines
    times = min(_MOST_TIMES, math.ceil(math.log(_MISS) / math.log(1 - reproduced / runs)))
    lines.append(f"reproduce with: {' '.join([*replay, '--times', str(times), *replay_words])} "
                 f"(over the URL it failed {reproduced} of {runs} reruns; exit 1 when any run fails)")
    return lines
