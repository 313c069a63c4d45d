"""A pytest plugin for ``test_isolation``: which other checks' ids each check's answers carry.

After each AideMemo check it writes one JSON line to ``$LEAK_PROBE_FILE``: the check, its declared
isolation, its verdict-bearing outcome, and every id minted by another check of the run (tag
``-RUNTAG-<8 hex>-N`` other than its own) found in the bodies of the answers it received. The
shared projects' own ids (tag ``shared...``) are not another check's data.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    world = getattr(item, "funcargs", {}).get("world")
    if call.when != "call" or world is None:
        return
    minted = re.compile(rf"[A-Za-z0-9._:-]+-{re.escape(world.run_tag)}-([0-9a-f]{{8}})-\d+")
    foreign = sorted({match.group(0) for entry in world.transcript.entries
                      for match in minted.finditer(getattr(entry, "body", b"").decode("utf-8", "replace"))
                      if match.group(1) != world.check_tag})
    line = {"check": item.nodeid.rsplit("/", 1)[-1], "isolation": str(world.isolation),
            "outcome": outcome.get_result().outcome, "foreign": foreign}
    with open(os.environ["LEAK_PROBE_FILE"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
