"""The toy profile's checks: each runs the CLI through its world and judges the output."""

from __future__ import annotations

import pytest


@pytest.mark.requirement("TOY-1")
def test_echo_prints_its_words(world):
    text = world.text("echo")
    done = world.user("alice").run("echo", text)
    assert done.exit_code == 0 and done.text() == text + "\n", f"echo printed {done.text()!r} (exit {done.exit_code})"


@pytest.mark.requirement("TOY-2")
def test_an_unknown_token_is_refused(world):
    done = world.stranger().run("echo", "hello")
    assert done.exit_code == 3 and done.stdout == b"", f"exit {done.exit_code}, stdout {done.stdout!r}"


@pytest.mark.requirement("TOY-3")
def test_shout_prints_upper_case(world):
    done = world.user("bob").run("shout", "quiet words")
    assert done.text() == "QUIET WORDS\n", done.text()
