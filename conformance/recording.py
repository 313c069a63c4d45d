"""From one check's pytest outcome to its verdict record, and the verdict back into pytest's outcome.

The verdict itself is ``conformance.verdicts.decide``'s; here is what feeds it (the exception,
the warnings of the check's world, the baseline entry that names the check) and what the
record carries besides (why, in words; the failing step and what was expected of it; the
transcript and what a replay needs, for checks that did not pass).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.errors import Departure, NotScored
from conformance.profile import World
from conformance.registry import Requirement
from conformance.reports.baseline import Baseline, Entry
from conformance.verdicts import Verdict, VerdictRecord, decide

__all__ = ["record_check", "rewrite_outcome"]


def record_check(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport, *,
                 requirement: Requirement, baseline: Baseline | None, seed: int, run_tag: str,
                 claims: dict[str, str], world: World | None, setup_s: float,
                 clauses: tuple[str, ...] = ()) -> VerdictRecord:
    """The verdict record of one check, from one phase's pytest outcome, its world and the baseline."""
    exception = call.excinfo.value if call.excinfo is not None else None
    skipped = report.skipped and not isinstance(exception, NotScored)
    if skipped and exception is not None and call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
        exception = None
    entry = baseline.match(item.nodeid, requirement.id) if baseline else None
    warnings = list(world.warnings) if world is not None else []
    transcript = world.transcript if world is not None else None
    entries = transcript.entries if transcript is not None else []
    verdict = decide(exception=exception, skipped=skipped, warned=bool(warnings), level=requirement.level,
                     expected_failure=entry is not None and entry.kind == "failure", phase=report.when)
    reason = _reason(exception, report, warnings, entry)
    if verdict is Verdict.ERROR and call.excinfo is not None:
        reason = _kit_fault(call.excinfo)
    keep = verdict not in (Verdict.PASS, Verdict.SKIP) and transcript is not None
    departed = exception if isinstance(exception, Departure) else None
    step = next((i for i, e in enumerate(entries) if departed is not None and e is departed.entry), None)
    return VerdictRecord(
        nodeid=item.nodeid, requirement=requirement.id, level=requirement.level, capability=requirement.capability,
        verdict=verdict, reason=reason, requests=len(entries), seed=seed, claims=claims,
        transcript=tuple(transcript.to_list()) if keep and transcript is not None else (),
        notes=tuple(transcript.notes) if keep and transcript is not None else (),
        baseline=entry.reason if entry is not None else "",
        duration_s=setup_s + (report.duration if report.when == "call" else 0.0),
        failed_step=step, expected=departed.expected if departed is not None and step is not None else "",
        namespace=run_tag if keep else "",
        ids=dict(transcript.ids) if keep and transcript is not None else {},
        identities=dict(transcript.identities) if keep and transcript is not None else {},
        clauses=clauses,
    )


def _kit_fault(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """Why a check read ERROR: its own exception and where it was raised, never the target's fault."""
    text = str(excinfo.value).strip()
    where = ""
    if excinfo.traceback:
        entry = excinfo.traceback[-1]
        where = f" at {Path(str(entry.path)).name}:{entry.lineno + 1}"
    return (f"the check itself raised {type(excinfo.value).__name__}{f': {text}' if text else ''}{where}: "
            "a bug in the kit, not a verdict on the target")


# Reasons are shown whole (terminal, HTML, JUnit); this bounds only what a hostile server can
# push into one through a check's message (an answer echoed into an assertion).
_REASON_CHARS = 16_384


def _reason(exception: BaseException | None, report: pytest.TestReport, warnings: list[str],
            baseline: Entry | None) -> str:
    if exception is not None:
        text = str(exception).strip() or type(exception).__name__
        if isinstance(exception, AssertionError):
            text = text.split("\nassert ")[0]
        if len(text) > _REASON_CHARS:
            text = text[:_REASON_CHARS] + f"... ({len(text)} characters; the transcript has the answers whole)"
        return text
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    if warnings:
        return "; ".join(warnings)
    if baseline is not None and baseline.kind == "failure":
        return f"stale baseline entry: the check passes, the baseline expects a failure ({baseline.reason})"
    if baseline is not None:
        return f"stale baseline entry: the check passes, the baseline expects a warning ({baseline.reason})"
    return ""


def rewrite_outcome(report: pytest.TestReport, item: pytest.Item, verdict: Verdict, reason: str) -> None:
    """Make pytest's own outcome agree with the verdict, so its exit status agrees too."""
    path, line, _ = item.location
    if verdict is Verdict.SKIP:
        report.outcome = "skipped"
        report.longrepr = (str(path), (line or 0) + 1, f"not scored: {reason}")
    elif verdict is Verdict.XFAIL:
        report.outcome = "skipped"
        report.wasxfail = f"baseline: {reason}"
        report.longrepr = None
    elif verdict in (Verdict.WARN, Verdict.INFO) and report.when == "call":
        report.outcome = "passed"
        report.longrepr = None
    elif verdict is Verdict.XPASS:
        report.outcome = "failed"
        report.longrepr = f"XPASS (stale baseline entry): {reason}"
