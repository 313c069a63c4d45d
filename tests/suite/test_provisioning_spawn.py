"""A bootstrap whose spawn fails before the program runs is tried again; other failures are not."""

from __future__ import annotations

import errno
import subprocess
import sys
from typing import Any

import pytest

from conformance.errors import Untestable
from conformance.provisioning import CommandProvisioner

_IDENTITY = {"tenant": "t", "project": "p", "actor": "a", "role": "writer"}
_TEMPLATE = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\").write(\"from-file\")' {{token_file}}"


def _failing_first(monkeypatch: pytest.MonkeyPatch, code: int, times: int) -> list[int]:
    real = subprocess.run
    calls: list[int] = []

    def run(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= times:
            raise OSError(code, "injected spawn failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    return calls


def test_a_spawn_that_failed_with_efault_is_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_first(monkeypatch, errno.EFAULT, 2)
    provisioner = CommandProvisioner(_TEMPLATE)
    try:
        assert provisioner.provision(_IDENTITY, "tok") == "from-file"
    finally:
        provisioner.close()
    assert len(calls) == 3


@pytest.mark.parametrize(("code", "times", "tried"), [(errno.ENOENT, 1, 1), (errno.EFAULT, 10, 3)],
                         ids=["a missing program is not retried", "a spawn failing every time gives up"])
def test_a_spawn_failure_that_stays_is_untestable(monkeypatch: pytest.MonkeyPatch, code: int, times: int,
                                                 tried: int) -> None:
    calls = _failing_first(monkeypatch, code, times)
    provisioner = CommandProvisioner(_TEMPLATE)
    try:
        with pytest.raises(Untestable, match="failed to run"):
            provisioner.provision(_IDENTITY, "tok")
    finally:
        provisioner.close()
    assert len(calls) == tried
