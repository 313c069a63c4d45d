"""The CI integrations as their runners would run them: the composite GitHub Action's shell steps
(action.yml, with GitHub's env files in a temporary directory) and the GitLab template's script,
against a reference served through ``[serve]``, clean and behind a planted bug; and the summary
and outputs ``aidememo-conformance run`` writes under GitHub's conventions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
import yaml

from conformance.reports.markdown import render_markdown

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
BOOTSTRAP = ("aidememo-ref bootstrap --database {dir}/ref.sqlite --tenant-id {tenant} --project-id {project} "
             "--actor-id {actor} --token-file {token_file} --role {role}")


def _served_target(where: Path, variant: str) -> Path:
    """A target file whose [serve] runs the reference, or a planted-bug variant of it."""
    target = where / "target.toml"
    target.write_text(tomli_w.dumps({
        "serve": {"command": [sys.executable, str(HERE / "serve_mutant.py"), variant, "{dir}/ref.sqlite", "{port}"]},
        "capabilities": {"test-clock": True, "artifacts": False},
        "provision": {"command": BOOTSTRAP}}), "utf-8")
    return target


def _env(where: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    for name in [name for name in env if name.startswith(("GITHUB_", "AIDEMEMO_"))]:
        del env[name]
    return env


def _expression(text: str, inputs: dict[str, str], outputs: dict[str, str] | None = None) -> str:
    """``${{ inputs.X }}``, ``${{ github.action_path }}`` and ``${{ steps.run.outputs.X }}`` as GitHub fills them."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        if name.startswith("inputs."):
            return inputs[name.removeprefix("inputs.")]
        if name == "github.action_path":
            return str(ROOT)
        if name.startswith("steps.run.outputs.") and outputs is not None:
            return outputs.get(name.removeprefix("steps.run.outputs."), "")
        if name == "steps.upload.outputs.artifact-url":  # what upload-artifact gives back
            return "https://github.example/artifacts/1"
        raise AssertionError(f"the test does not know the expression {name!r}")

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def _run_action(where: Path, **given: str) -> tuple[int, str, dict[str, str]]:
    """Every shell step of action.yml in order (as GitHub runs ``shell: bash``), until one fails;
    then the action's outputs. The ``uses:`` steps (setup-python, upload-artifact) are the runner's."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs.update(given)
    files = {"GITHUB_OUTPUT": where / "output", "GITHUB_STEP_SUMMARY": where / "summary.md",
             "GITHUB_ACTION_PATH": ROOT}
    for name, path in files.items():
        if name != "GITHUB_ACTION_PATH":
            path.write_text("")
    code = 0
    step_outputs: dict[str, str] = {}
    for step in action["runs"]["steps"]:
        if "uses" in step or (code and step.get("if") != "always()"):
            continue
        assert step["shell"] == "bash"
        env = {**_env(where), **{k: str(v) for k, v in files.items()},
               **{name: _expression(str(value), inputs) for name, value in step.get("env", {}).items()}}
        assert "${{" not in step["run"], "an expression pasted into a script would run an input as code"
        script = where / "step.sh"
        script.write_text(step["run"])
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=where, env=env,
                              capture_output=True, text=True, timeout=600)
        if step.get("id") == "run":
            step_outputs = dict(line.split("=", 1) for line in files["GITHUB_OUTPUT"].read_text().splitlines() if line)
        code = code or done.returncode  # a failed step skips the later ones, except if: always()
    outputs = {name: _expression(spec["value"], inputs, step_outputs) for name, spec in action["outputs"].items()}
    return code, files["GITHUB_STEP_SUMMARY"].read_text(), outputs


def test_the_action_uploads_the_reports_whatever_the_verdict():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    upload = next(step for step in action["runs"]["steps"] if str(step.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ inputs.report-dir }}"
    assert {"target", "profile", "baseline", "args", "kit-version", "report-dir"} <= set(action["inputs"])
    assert {"result", "pass", "fail", "warn", "xfail"} <= set(action["outputs"])


@pytest.mark.parametrize(("variant", "code", "result"), [("reference", 0, "pass"), ("reader_can_write", 1, "fail")])
def test_the_action_against_a_served_target(tmp_path, variant, code, result):
    target = _served_target(tmp_path, variant)
    exit_code, summary, outputs = _run_action(tmp_path, target=str(target), args="--requirement AM-AUTH",
                                              **{"kit-version": "installed", "report-dir": "reports"})
    assert exit_code == code, summary
    assert outputs["result"] == result and int(outputs["pass"]) >= 20
    assert (tmp_path / "reports" / "junit.xml").is_file() and (tmp_path / "reports" / "serve.log").is_file()
    assert "protocol at upstream commit e2a15d4" in summary and "reports/report.html" in summary
    assert summary.endswith("Reports: [aidememo-report](https://github.example/artifacts/1) "
                            "(report.html, results.json, junit.xml)\n"), summary[-300:]
    if result == "pass":
        assert outputs["fail"] == "0" and "✅" in summary and "every scored MUST holds" in summary
        assert "Failing and warning requirements" not in summary
    else:
        assert int(outputs["fail"]) >= 1 and "❌" in summary
        # The requirement with its sentence, each failing check with its reason and its rerun command.
        assert "**FAIL AM-AUTH-4**: A reader's token on any write route" in summary
        assert re.search(r"FAIL ` test_auth\.py::test_reader_cannot_write\[sessions\] `: expected HTTP 403", summary)
        assert f"rerun: ` aidememo-conformance run --config {target} --seed" in summary
        # The served server is gone with the run: a case's replay script says so.
        results = json.loads((tmp_path / "reports" / "results.json").read_text())
        script = Path(next(r["script"] for r in results["records"] if r["verdict"] == "FAIL")).read_text()
        assert "started from the target file's [serve] command and stopped with the run" in script


def test_the_gitlab_template_runs_with_its_junit_report_wired(tmp_path):
    template = yaml.safe_load((ROOT / "ci" / "gitlab" / "aidememo-conformance.yml").read_text())
    job = template[".aidememo-conformance"]
    report_dir = job["variables"]["CONFORMANCE_REPORT_DIR"]
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == "$CONFORMANCE_REPORT_DIR/junit.xml"
    env = {**_env(tmp_path), **{k: str(v) for k, v in job["variables"].items()},
           "CONFORMANCE_TARGET": str(_served_target(tmp_path, "reader_can_write")),
           "CONFORMANCE_ARGS": "--requirement 'AM-AUTH-4'", "CONFORMANCE_KIT": "installed"}
    done = subprocess.run(["sh", "-c", "\n".join(job["script"])], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    assert "FAIL AM-AUTH-4" in (tmp_path / report_dir / "summary.md").read_text()
    assert "AM-AUTH-4" in (tmp_path / report_dir / "junit.xml").read_text()


def test_summary_md_lists_xfails_and_stale_entries_and_escapes_what_the_target_said():
    results = {"title": "AideMemo", "target": "http://t", "result": "stale baseline entries", "profile": "aidememo",
               "seed": 1, "kit": "aidememo-conformance 0.1.0", "protocol_commit": "e2a15d4", "health": {"status": "ok"},
               "counts": {"PASS": 1, "XFAIL": 1, "WARN": 1},
               "stale_baseline": ["test_a.py::test_b (expected_failure)"],
               "records": [
                   {"nodeid": "test_x.py::test_known", "requirement": "AM-1", "verdict": "XFAIL", "reason": "r",
                    "baseline": "issue #12: scheme folded"},
                   {"nodeid": "test_y.py::test_w", "requirement": "AM-2", "verdict": "WARN",
                    "reason": "answered <script>alert(1)</script> | *bold* `tick`", "rerun": "aidememo-conformance run `x`"}]}
    text = render_markdown(results, {"AM-2": "A SHOULD sentence."}, 0, ["r/report.html"])
    assert "XFAIL" in text and "issue #12: scheme folded" in text and "test\\_x.py::test\\_known" not in text
    assert "test_a.py::test\\_b (expected\\_failure)" in text or "test\\_a.py::test\\_b" in text
    assert "<script>" not in text and "&lt;script&gt;" in text and "\\|" in text and "\\*bold\\*" in text
    assert "**WARN AM-2**: A SHOULD sentence." in text and "`` aidememo-conformance run `x` ``" in text
    assert "| 1 | 0 | 1 |" in text


def test_the_action_says_why_when_the_server_never_came_up(tmp_path):
    target = tmp_path / "target.toml"
    target.write_text(tomli_w.dumps({
        "serve": {"command": [sys.executable, str(HERE / "serve_fakes.py"), "never", "{port}", str(tmp_path / "pids")],
                  "ready_timeout": 1},
        "provision": {"command": BOOTSTRAP}}), "utf-8")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "results.json").write_text('{"result": "an earlier run", "records": []}')
    exit_code, summary, outputs = _run_action(tmp_path, target=str(target),
                                              **{"kit-version": "installed", "report-dir": "reports"})
    assert exit_code == 2 and outputs["result"] == "error", summary
    assert "warming up the cache" in summary and "an earlier run" not in summary
