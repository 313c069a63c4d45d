"""``aidememo-conformance``: bad input is one line and exit 2; the target file resolves by precedence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.errors import ConfigError
from conformance.profiles.aidememo.settings import target_settings


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Never the repository's directory: a run leaves its reports where it runs.
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


@pytest.mark.parametrize(("args", "needle"), [
    (["run", "--url", "ftp://x"], "expected an http:// or https:// URL"),
    (["run", "--url", "http://127.0.0.1:9"], "say how to get identities"),
    (["run", "--config", "/nonexistent/target.toml"], "target file /nonexistent/target.toml"),
    (["run", "--capability", "teleport"], "unknown capability 'teleport'"),
    (["run", "--seed", "x1"], "--seed: expected a non-negative integer"),
    (["run", "--timeout", "-3"], "must be between 0 and 600"),
    (["run", "--baseline", "/nonexistent/b.toml"], "baseline /nonexistent/b.toml"),
    (["run", "test_nowhere.py::test_x"], "no check module 'test_nowhere.py'"),
    (["run", "-n", "many"], "-n: expected a number"),
    (["frobnicate"], "invalid choice"),
    (["run", "--report-dir", "/proc/no-such-place/reports"], "--report-dir /proc/no-such-place/reports"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "aidememo-report").exists(), "bad input left a report directory behind"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_bad_target_file_names_the_file_and_key(tmp_path):
    bad = tmp_path / "target.toml"
    bad.write_text('url = "http://127.0.0.1:1"\n[provision]\ncommand = "bootstrap --project {project}"\n')
    done = _cli("run", "--config", str(bad), cwd=tmp_path)
    assert done.returncode == 2 and "provision.command" in done.stderr and "{actor}" in done.stderr, done.stderr


def test_target_file_that_is_not_utf8_is_one_line(tmp_path):
    bad = tmp_path / "target.toml"
    bad.write_bytes(b'url = "\xff\xfe"\n')
    done = _cli("run", "--config", str(bad), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_fixed_tokens_come_from_value_env_or_file(tmp_path):
    (tmp_path / "r.token").write_text("reader-token\n")
    target = tmp_path / "target.toml"
    target.write_text('url = "http://127.0.0.1:3030"\n'
                      '[[provision.tokens]]\nproject = "p"\nactor = "w"\nrole = "writer"\ntoken = "writer-token"\n'
                      '[[provision.tokens]]\nproject = "p"\nactor = "e"\ntoken_env = "MY_TOKEN"\n'
                      '[[provision.tokens]]\nproject = "p"\nactor = "r"\nrole = "reader"\ntoken_file = "r.token"\n')
    settings = target_settings(str(target), environ={"MY_TOKEN": "env-token"})
    assert [(t["actor"], t["role"], t.token) for t in settings.fixed_tokens] == [
        ("w", "writer", "writer-token"), ("e", "writer", "env-token"), ("r", "reader", "reader-token")]
    assert settings.mode == "fixed-tokens"
    with pytest.raises(ConfigError, match="MY_TOKEN is empty"):
        target_settings(str(target), environ={})


def test_requirements_command_lists_every_requirement(tmp_path):
    done = _cli("requirements", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "AM-HO-1" in done.stdout and "AM-CONF-15" in done.stdout and "untested MUSTs:" in done.stdout
