"""Target files for the kit's own tests, written with tomli-w so no value is ever escaped by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import tomli_w

__all__ = ["token_entry", "write_target"]


def token_entry(project: str, actor: str, role: str = "writer", **source: str) -> dict[str, str]:
    """One ``[[provision.tokens]]`` entry; ``source`` is ``token=``, ``token_file=`` or ``token_env=``."""
    return {"project": project, "actor": actor, "role": role, **source}


def write_target(path: Path, url: str, tokens: Iterable[Mapping[str, str]] = (), **settings: object) -> Path:
    """Write a conformance/simulator target file (``url``, top-level ``settings``, fixed tokens)."""
    document: dict[str, object] = {"url": url, **settings}
    entries = [dict(entry) for entry in tokens]
    if entries:
        document["provision"] = {"tokens": entries}
    path.write_text(tomli_w.dumps(document), encoding="utf-8")
    return path
