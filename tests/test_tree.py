"""The tree carries no dead weight: exported names have users, package-data globs match files."""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["root_packages"])


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in out.split() if (ROOT / name).exists()]


def test_every_exported_name_is_used_outside_its_definition() -> None:
    texts = {path: path.read_text(encoding="utf-8") for path in _tracked("*.py", "*.sh", "*.md", "*.toml")}
    words = {path: re.findall(r"\w+", text) for path, text in texts.items()}
    files_with: dict[str, int] = {}
    for found in words.values():
        for word in set(found):
            files_with[word] = files_with.get(word, 0) + 1
    unused = []
    for path, text in texts.items():
        if path.suffix != ".py" or path.relative_to(ROOT).parts[0] not in PACKAGES:
            continue
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                assert isinstance(node.value, (ast.List, ast.Tuple))
                for item in node.value.elts:
                    assert isinstance(item, ast.Constant) and isinstance(item.value, str)
                    # its definition and its __all__ entry are two mentions; a user is a third, or another file
                    if words[path].count(item.value) <= 2 and files_with.get(item.value, 0) <= 1:
                        unused.append(f"{path.relative_to(ROOT)}: {item.value}")
    assert not unused, "exported but never used (remove it, or use it):\n" + "\n".join(unused)


def test_every_package_data_glob_matches_a_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["*"]
    shipped = [p.name for p in _tracked(*PACKAGES)]
    empty = [glob for glob in globs if not fnmatch.filter(shipped, glob)]
    assert not empty, f"package-data globs that match nothing: {empty}"
