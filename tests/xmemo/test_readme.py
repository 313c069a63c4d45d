"""The README's XMemo example runs as printed (bootstrap commands and the six-step Python block)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from aidememo_ref import serve_in_thread
from xmemo_ref import XMemoReference

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks() -> tuple[str, str]:
    section = README.read_text().split("## XMemo: agent-to-agent memory", 1)[1].split("\n## ", 1)[0]
    shell, python = re.findall(r"```(?:sh|python)\n(.*?)```", section, re.S)[:2]
    return shell, python


def test_readme_xmemo_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aidememo_cli import main

    shell, python = blocks()
    monkeypatch.chdir(tmp_path)
    for line in shell.splitlines():
        command = line.split("#")[0].strip()
        if command.startswith("python3 -c"):  # key generation: same shape, written here
            name = command.split("> ")[1].split()[0]
            (tmp_path / name).write_text("xmemo-" + "ab" * 24 + name + "\n")
            (tmp_path / name).chmod(0o600)
        elif "bootstrap" in command:
            assert main(shlex.split(command)[1:]) == 0
    reference = XMemoReference(tmp_path / "xmemo.sqlite")
    out = io.StringIO()
    with serve_in_thread(reference) as url, contextlib.redirect_stdout(out):
        exec(compile(python.replace('"http://127.0.0.1:3040"', repr(url)), "README.md", "exec"), {})
    reference.close()
    printed = [ast.literal_eval(line) for line in out.getvalue().splitlines()]
    assert len(printed) == 4 and {b["relation"] for b in printed} == {"self", "other_agent"}
    assert all(b["boundary_authority"] == "attribution_only" for b in printed)
