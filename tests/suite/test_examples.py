"""The target files the docs point at stay valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.profiles.aidememo.settings import target_settings

SERVED = {"aidememo-ref-served.toml", "aidememo-ref-postgres-two-servers.toml"}
EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "docs" / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_target_file_resolves(path: Path) -> None:
    settings = target_settings(str(path), environ={})
    # A [serve]d target's port is the kit's to choose, filled in once its server runs (tests/suite/test_serve.py).
    assert settings.url == ("http://127.0.0.1:{port}" if path.name in SERVED else "http://127.0.0.1:3030")
    assert "{token_file}" in str(settings.provision_command)
    # The real server has no test clock: its example scores lease expiry by waiting for real.
    assert settings.real_time_leases is (path.name == "aidememo-server.toml")


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} == {"aidememo-ref.toml", "aidememo-server.toml", *SERVED}


def test_the_two_server_example_names_two_servers() -> None:
    from conformance.installed import resolve_run
    from conformance.serve import SERVE
    from conformance.settings import SettingsInput

    path = next(p for p in EXAMPLES if p.name == "aidememo-ref-postgres-two-servers.toml")
    _, settings = resolve_run(SettingsInput(flags={"config": str(path)}, environ={}))
    spec = settings[SERVE]
    assert spec is not None and len(spec.others) == 1 and spec.others[0].command == spec.command
