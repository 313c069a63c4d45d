"""The mark a check (or one parameter of a check) carries to say which clauses it reads.

``@reads("XM-CAP-3", "version")`` is ``@pytest.mark.requirement("XM-CAP-3", clauses=("version",))``;
on a parameter, ``pytest.param(x, marks=reads("AM-AUTH-2", "scheme"))`` adds that parameter's
clauses to its check's (see ``conformance.registry`` for what a clause is).
"""

from __future__ import annotations

import pytest

__all__ = ["reads"]


def reads(requirement_id: str, *clauses: str) -> pytest.MarkDecorator:
    """The ``requirement`` mark of a check reading ``clauses`` of ``requirement_id``."""
    return pytest.mark.requirement(requirement_id, clauses=clauses)
