"""Hooks a conftest may implement to adapt the suite to a server.

``pytest_aidememo_provision`` is for servers that can be provisioned, but not by a shell
command: a conftest that speaks the server's admin API implements it, and the suite calls it
once per actor it needs (instead of the target file's command template).
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_aidememo_provision"]


@pytest.hookspec(firstresult=True)
def pytest_aidememo_provision(
    config: pytest.Config, tenant: str, project: str, actor: str, role: str, token: str
) -> bool | None:
    """Make ``actor`` an active member of ``project`` in ``tenant`` with ``role``, bound to ``token``.

    Returns:
        True when handled; None to let another implementation try. Raise to report the
        identity as unavailable (the check reads UNTESTABLE).
    """
