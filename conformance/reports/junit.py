"""``junit.xml``: the run's verdicts in the JUnit XML that CI dashboards read.

One ``testcase`` per check, written from the verdict records (so a check that never ran, or
whose verdict pytest's own outcome cannot say, is there as it is in ``results.json``). Each
case carries ``requirement``, ``level``, ``capability`` and ``verdict`` properties, and
``reason`` and ``rerun`` when it did not pass.

Which element a verdict becomes is chosen by what the dashboards show. GitLab reads only the
``failure``, ``error`` and ``skipped`` elements of a case and shows ``system-out`` for failed
cases alone; Jenkins shows case properties and ``system-out``; the GitHub test reporters list
failed and skipped cases. A passed case is shown with nothing, so a WARN written as a pass is
invisible on all of them. A WARN (and an INFO) is therefore written ``skipped`` with
``type="conformance.WARN"`` and the reason as its message and text: it fails no build, and
every dashboard lists it with its reason; the ``verdict`` property tells it from a SKIP.

    PASS                            (properties only)
    FAIL UNTESTABLE UNKNOWN XPASS   <failure type="conformance.VERDICT" message="...">reason, rerun</failure>
    ERROR                           <error type="conformance.ERROR" ...>
    SKIP XFAIL WARN INFO            <skipped type="conformance.VERDICT" message="...">reason</skipped>
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from typing import Any

from conformance.verdicts import Verdict, VerdictRecord

__all__ = ["render_junit"]

_FAILURE = frozenset({Verdict.FAIL, Verdict.UNTESTABLE, Verdict.UNKNOWN, Verdict.XPASS})
_SKIPPED = frozenset({Verdict.SKIP, Verdict.XFAIL, Verdict.WARN, Verdict.INFO})
# Characters XML 1.0 cannot carry at all (a hostile server's answer may hold them): shown as \xNN.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def _properties(parent: ET.Element, values: Mapping[str, object]) -> None:
    node = ET.SubElement(parent, "properties")
    for name, value in values.items():
        if value not in ("", None):
            ET.SubElement(node, "property", name=name, value=_text(value))


def _names(nodeid: str) -> tuple[str, str, str]:
    """(classname, name, file) as pytest's JUnit writer spells them: ``a/test_b.py::test_c`` ->
    ``a.test_b``, ``test_c``, ``a/test_b.py``."""
    path, _, name = nodeid.partition("::")
    return path.removesuffix(".py").replace("/", "."), name.replace("::", "."), path


def _case(parent: ET.Element, record: VerdictRecord) -> None:
    classname, name, path = _names(record.nodeid)
    case = ET.SubElement(parent, "testcase", classname=_text(classname), name=_text(name), file=_text(path),
                         time=f"{record.duration_s:.3f}")
    verdict = record.verdict
    ok = verdict is Verdict.PASS
    _properties(case, {"requirement": record.requirement, "level": record.level, "capability": record.capability,
                       "verdict": verdict, "reason": "" if ok else record.reason, "baseline": record.baseline,
                       "rerun": "" if ok else record.rerun})
    if ok:
        return
    first = record.reason.splitlines()[0] if record.reason else ""
    head = _text(f"{verdict} {record.requirement} ({record.level}): {first}")
    text = _text("\n".join(part for part in (record.reason, f"rerun: {record.rerun}" if record.rerun else "") if part))
    tag = "failure" if verdict in _FAILURE else "skipped" if verdict in _SKIPPED else "error"
    ET.SubElement(case, tag, type=f"conformance.{verdict}", message=head).text = text
    ET.SubElement(case, "system-out").text = f"{head}\n{text}"


def render_junit(summary: Mapping[str, Any], records: list[VerdictRecord], timestamp: str) -> str:
    """The JUnit XML document of one run (see the module docstring)."""
    counts = Counter(r.verdict for r in records)
    totals = {"tests": str(len(records)),
              "failures": str(sum(counts[v] for v in _FAILURE)),
              "errors": str(counts[Verdict.ERROR]),
              "skipped": str(sum(counts[v] for v in _SKIPPED)),
              "time": f"{sum(r.duration_s for r in records):.3f}"}
    title = f"{summary['title']} conformance (profile {summary['profile']})"
    root = ET.Element("testsuites", {"name": _text(title), **totals})
    suite = ET.SubElement(root, "testsuite", {"name": _text(title), "timestamp": timestamp, **totals})
    _properties(suite, {"profile": summary["profile"], "target": summary["target"], "mode": summary["mode"],
                        "seed": summary["seed"], "run_tag": summary["run_tag"], "kit": summary["kit"],
                        "protocol_commit": summary.get("protocol_commit", ""), "result": summary.get("result", "")})
    for record in records:
        _case(suite, record)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
