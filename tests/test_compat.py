"""The import paths documented before the package split still work.

``aidememo_ref`` stays the facade and keeps its documented submodules (``client``, ``wire``,
``process``) as plain aliases of their new homes. The XMemo reference and its race campaign
moved to their own packages; the old names forward to them with a ``DeprecationWarning``, and
an XMemo regression file exported by the previous release (which imports
``simulations.xmemo_races``) still runs, with the same answer each time.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import aidememo_client.client
import aidememo_wire.shapes
import refkit.process
import xmemo_ref
import xmemo_ref.client
from simulations.xmemo import races as xmemo_races
from tests.xmemo import races

REPO = Path(__file__).resolve().parents[1]
RACES = str(REPO / "tests" / "xmemo" / "races.py")


def test_the_readme_facade_imports_work() -> None:
    from aidememo_ref import AideMemoClient, ManualClock, ReferenceLedger, serve_in_thread

    assert AideMemoClient is aidememo_client.client.AideMemoClient
    assert ReferenceLedger.__module__ == "aidememo_ref._reference"
    assert callable(serve_in_thread) and ManualClock(0).now_ms() == 0


@pytest.mark.parametrize(("old", "new"), [
    ("aidememo_ref.client", aidememo_client.client),
    ("aidememo_ref.wire", aidememo_wire.shapes),
    ("aidememo_ref.process", refkit.process),
])
def test_the_facades_documented_modules_are_aliases_without_a_warning(old: str, new: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(old)
    names = getattr(new, "__all__")
    assert module.__all__ == names and names
    assert all(getattr(module, name) is getattr(new, name) for name in names)


@pytest.mark.parametrize(("old", "new"), [
    ("aidememo_ref.xmemo", xmemo_ref),
    ("aidememo_ref.xmemo.client", xmemo_ref.client),
    ("simulations.xmemo_races", xmemo_races),
])
def test_moved_modules_forward_with_a_deprecation_warning(old: str, new: object, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.warns(DeprecationWarning, match=old.replace(".", r"\.") + " is deprecated"):
        module = importlib.import_module(old)
    names = getattr(new, "__all__")
    assert list(module.__all__) == list(names) and names
    assert all(getattr(module, name) is getattr(new, name) for name in names)


def test_an_xmemo_regression_file_from_the_previous_release_still_runs(tmp_path: Path) -> None:
    found = next((run for seed in range(1, 30)
                  if (run := xmemo_races.run_campaign(seed=seed, max_batches=6,
                                                      factory=races.check_then_act)).finding is not None), None)
    assert found is not None, "the planted race was never hit"
    paths = xmemo_races.export_failure(found, tmp_path, factory=f"{RACES}:check_then_act")
    exported = paths["pytest file"]
    text = exported.read_text()
    assert "from simulations.xmemo.races import reproduce" in text
    exported.write_text(text.replace("from simulations.xmemo.races import", "from simulations.xmemo_races import"))
    for proc in (_run_pytest(exported), _run_pytest(exported)):  # the race shows, the same each time
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "1 failed" in proc.stdout and "assert 1 == 0" in proc.stdout
        assert "simulations.xmemo_races is deprecated" in proc.stdout
    replay = paths["replay file"]
    doc = json.loads(replay.read_text())
    replay.write_text(json.dumps(dict(doc, target={"kind": "embedded", "factory": None})))
    for proc in (_run_pytest(exported), _run_pytest(exported)):  # the correct reference: it passes
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "1 passed" in proc.stdout


def _run_pytest(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:aidememo",
                           str(path)], capture_output=True, text=True, timeout=120, cwd=REPO)
