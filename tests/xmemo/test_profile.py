"""The xmemo profile beyond the embedded reference: example target files, a served reference provisioned by
command, and a fixed key list where what cannot be asked is not scored (never counted as a pass)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from aidememo_ref import serve_in_thread
from xmemo_ref import XMemoReference
from conformance.installed import resolve_run
from conformance.profiles.xmemo.settings import PROVISION_BOUND_COMMAND, PROVISION_COMMAND, PROVISION_TOKENS
from conformance.settings import SettingsInput
from tests.targetfile import write_target

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "xmemo"


def run_suite(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--seed", "7", "--report-dir",
                           str(tmp_path / "report"), *args], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    results = tmp_path / "report" / "results.json"
    assert results.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(results.read_text())["records"]


def test_the_example_target_files_resolve() -> None:
    profile, settings = resolve_run(SettingsInput(flags={"config": str(EXAMPLES / "reference.toml")}, environ={}))
    assert profile.name == "xmemo" and "{owner}" in str(settings[PROVISION_COMMAND])
    assert "{agent}" in str(settings[PROVISION_BOUND_COMMAND])
    env = {"XMEMO_KEY_A1": "a" * 30, "XMEMO_KEY_A_READ": "r" * 30, "XMEMO_KEY_B": "b" * 30}
    profile, settings = resolve_run(SettingsInput(flags={"config": str(EXAMPLES / "hosted.toml")}, environ=env))
    assert [i["owner"] for i in settings[PROVISION_TOKENS]] == ["account-a", "account-a", "account-b"]
    assert {p.name for p in EXAMPLES.glob("*.toml")} == {"reference.toml", "hosted.toml"}


def test_a_served_reference_provisioned_by_its_bootstrap_command(tmp_path: Path) -> None:
    reference = XMemoReference(tmp_path / "xmemo.sqlite")  # the file the example's commands name
    with serve_in_thread(reference) as url:
        done, records = run_suite(tmp_path, "--config", str(EXAMPLES / "reference.toml"), "--url", url,
                                  "--requirement", "XM-FLOW-", "--requirement", "XM-BND-")
    reference.close()
    assert done.returncode == 0, done.stdout[-3000:]
    assert records and all(r["verdict"] == "PASS" for r in records), [(r["nodeid"], r["verdict"]) for r in records]
    assert any(r["requirement"] == "XM-BND-6" for r in records)  # bound keys came from bound_command


def test_a_fixed_key_list_scores_what_it_can_and_skips_the_rest(tmp_path: Path) -> None:
    reference = XMemoReference(tmp_path / "xmemo.sqlite")
    keys = {"a1": "xm-listed-a1-0123456789abcdef", "a2": "xm-listed-a2-0123456789abcdef"}
    for key in keys.values():
        reference.provision(owner_id="listed", key=key)
    with serve_in_thread(reference) as url:
        target = write_target(tmp_path / "target.toml", url, [{"owner": "listed", "token": key} for key in keys.values()],
                              profile="xmemo", capabilities={"agent-binding": False})
        done, records = run_suite(tmp_path, "--config", str(target), "--requirement", "XM-ISO-",
                                  "--requirement", "XM-FLOW-", "--requirement", "XM-AUTH-4")
    reference.close()
    verdicts = {r["nodeid"].rsplit("::", 1)[-1]: r["verdict"] for r in records}
    assert verdicts["test_another_owners_memories_are_never_returned"] == "SKIP"  # one listed owner only
    assert verdicts["test_a_read_only_key_cannot_write_and_a_write_only_key_cannot_read"] == "SKIP"
    assert all(v == "PASS" for name, v in verdicts.items() if "flow" in name or "step" in name), verdicts
    assert verdicts["test_a_scope_filter_returns_only_that_scope"] == "PASS"
    assert not any(key in done.stdout + done.stderr for key in keys.values())
    report = (tmp_path / "report" / "report.html").read_text()
    assert not any(key in report for key in keys.values())


def test_every_requirement_is_documented_with_its_basis() -> None:
    import re

    from conformance.installed import load_profile

    registry = load_profile("xmemo").registry()
    documented = set(re.findall(r"XM-[A-Z]+-\d+", (EXAMPLES.parents[1] / "xmemo.md").read_text()))
    ids = {r.id for r in registry}
    ranges = {f"XM-FLOW-{n}" for n in range(1, 7)} | {"XM-BND-2", "XM-BND-3", "XM-BND-4", "XM-BND-5", "XM-BND-6",
                                                       "XM-CAP-3", "XM-CAP-4", "XM-CAP-5"}
    assert ids - documented - ranges == set(), "requirements docs/xmemo.md does not name"
    assert documented - ids == set(), "docs/xmemo.md names ids the registry lacks"
    assert {r.basis for r in registry} == {"evidenced", "seed", "kit"}
