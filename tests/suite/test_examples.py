"""The target files the docs point at stay valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.profiles.aidememo.settings import target_settings

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "docs" / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_target_file_resolves(path: Path) -> None:
    settings = target_settings(str(path), environ={})
    # A [serve]d target's port is the kit's to choose, filled in once its server runs (tests/suite/test_serve.py).
    assert settings.url == ("http://127.0.0.1:{port}" if path.name == "aidememo-ref-served.toml"
                            else "http://127.0.0.1:3030")
    assert "{token_file}" in str(settings.provision_command)
    # The real server has no test clock: its example scores lease expiry by waiting for real.
    assert settings.real_time_leases is (path.name == "aidememo-server.toml")


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} == {"aidememo-ref.toml", "aidememo-ref-served.toml", "aidememo-server.toml"}
