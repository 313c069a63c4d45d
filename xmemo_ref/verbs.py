"""The XMemo reference's command-line verbs, ``aidememo-ref xmemo bootstrap|serve``: the seam the
command line calls."""

from __future__ import annotations

__all__ = ["run"]


def run(argv: list[str]) -> int:
    """``aidememo-ref xmemo ARGS``; the exit status."""
    from ._verbs import run as run_verb

    return run_verb(argv)
