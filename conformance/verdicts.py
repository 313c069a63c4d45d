"""Verdicts: what a check's pytest outcome means for its requirement, and the record of it.

The table (outcome x phase x level x baseline -> verdict) is here and nowhere else, in ``decide``:

    passed, no warning                      -> PASS    (XPASS when the baseline expected a failure)
    passed with a recorded warning          -> WARN
    AssertionError / TargetError, MUST      -> FAIL    (XFAIL when the baseline lists it);
                                               UNTESTABLE when it was raised in set-up
    AssertionError / TargetError, SHOULD    -> WARN    (set-up too)
    AssertionError / TargetError, MAY       -> INFO    (set-up too)
    Untestable (setup step failed)          -> UNTESTABLE (XFAIL when the baseline lists it)
    NotScored / capability unclaimed        -> SKIP
    Indeterminate (only retryable answers)  -> UNKNOWN
    ShapeError (an answer lacks a field)    -> as AssertionError (it is one): the target departed
    any other exception (a bug in a check)  -> ERROR: KeyError, AttributeError... are the kit's own
    collected but never run (interrupted)   -> UNTESTABLE

A check judged in more than one phase keeps its first verdict, unless that was PASS and a
later phase (a teardown error) judged otherwise (``replaces``).

Only the answer helpers of ``conformance.answers`` decide that an answer has the wrong shape;
a ``KeyError`` of the check's own dictionaries or an ``AttributeError`` of a misspelt actor
is never scored as the target failing.

``Verdict.ok`` says whether a verdict lets the run succeed (PASS, WARN, INFO, SKIP, XFAIL);
``Verdict.severity`` orders verdicts from harmless to worst, for a requirement's worst verdict
and the order failures are listed in. Everything that reports verdicts asks these two.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Literal

from conformance.errors import Indeterminate, NotScored, TargetError, Untestable
from conformance.registry import Level

__all__ = ["Phase", "Verdict", "VerdictRecord", "decide", "replaces"]

# pytest's phases, and "unrun" for a check collected but never run (an interrupted run).
Phase = Literal["setup", "call", "teardown", "unrun"]


class Verdict(StrEnum):
    """One check's verdict; declaration order is the order reports count them in."""

    PASS = "PASS"
    FAIL = "FAIL"
    WARN = "WARN"
    INFO = "INFO"
    SKIP = "SKIP"
    UNTESTABLE = "UNTESTABLE"
    UNKNOWN = "UNKNOWN"
    XFAIL = "XFAIL"
    XPASS = "XPASS"
    ERROR = "ERROR"

    @property
    def ok(self) -> bool:
        """The verdict lets the run succeed."""
        return self in _OK

    @property
    def scored(self) -> bool:
        """The check judged the target (everything but SKIP)."""
        return self is not Verdict.SKIP

    @property
    def severity(self) -> int:
        """0 for PASS up to the worst verdict, FAIL: a server departing from a MUST comes first."""
        return _SEVERITY.index(self)


_OK = frozenset({Verdict.PASS, Verdict.WARN, Verdict.INFO, Verdict.SKIP, Verdict.XFAIL})
# Harmless to worst. A FAIL says most about the target, so it outranks the kit's own ERROR and a
# stale baseline; UNKNOWN and UNTESTABLE say the point was never reached.
_SEVERITY = (Verdict.PASS, Verdict.SKIP, Verdict.INFO, Verdict.WARN, Verdict.XFAIL, Verdict.UNTESTABLE,
             Verdict.UNKNOWN, Verdict.XPASS, Verdict.ERROR, Verdict.FAIL)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictRecord:
    """The result of one check: the verdict, why, and what it takes to reproduce it."""

    nodeid: str
    requirement: str
    level: Level
    capability: str
    verdict: Verdict
    reason: str = ""
    requests: int = 0
    seed: int = 0
    claims: dict[str, str] = field(default_factory=dict)  # capability -> how it was claimed
    transcript: tuple[dict[str, object], ...] = ()  # redacted entries, for failures and warnings
    notes: tuple[str, ...] = ()
    rerun: str = ""  # the command replaying the check (filled in by the reports)
    replay: str = ""  # the replay runner's command for the reproduction (filled in by the reports)
    script: str = ""  # the reproduction's shell script, a file in the report folder (filled in by the reports)
    clauses: tuple[str, ...] = ()  # the requirement's clauses the check reads (none: it has none)
    baseline: str = ""  # the reason of the baseline entry that names this check, if one does
    duration_s: float = 0.0  # set-up and call, as pytest timed them
    failed_step: int | None = None  # index into the transcript of the step that departed, when known
    expected: str = ""  # what was expected of that step ("HTTP 409 stale_revision")
    namespace: str = ""  # the run tag inside the ids the check minted (see conformance.world)
    ids: dict[str, str] = field(default_factory=dict)  # those ids (id -> the namespace in it), for a replay
    identities: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> provisioning values

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def severity(self) -> int:
        return self.verdict.severity

    @property
    def check(self) -> str:
        """``test_module.py::test_name[param]``: how the command line names the check anywhere."""
        return self.nodeid.rsplit("/", 1)[-1]

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["level"] = str(self.level)
        data["verdict"] = str(self.verdict)
        data["transcript"] = list(self.transcript)
        data["notes"] = list(self.notes)
        data["clauses"] = list(self.clauses)
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> VerdictRecord:
        transcript = data.get("transcript") or []
        notes = data.get("notes") or []
        claims = data.get("claims") or {}
        clauses = data.get("clauses") or []
        return cls(
            nodeid=str(data["nodeid"]),
            requirement=str(data["requirement"]),
            level=Level(str(data["level"])),
            capability=str(data["capability"]),
            verdict=Verdict(str(data["verdict"])),
            reason=str(data.get("reason", "")),
            requests=int(str(data.get("requests", 0))),
            seed=int(str(data.get("seed", 0))),
            claims={str(k): str(v) for k, v in claims.items()} if isinstance(claims, dict) else {},
            transcript=tuple(e for e in transcript if isinstance(e, dict)) if isinstance(transcript, list) else (),
            notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
            rerun=str(data.get("rerun", "")),
            replay=str(data.get("replay", "")),
            script=str(data.get("script", "")),
            clauses=tuple(str(c) for c in clauses) if isinstance(clauses, list) else (),
            baseline=str(data.get("baseline", "")),
            duration_s=float(str(data.get("duration_s", 0.0))),
            failed_step=int(str(step)) if (step := data.get("failed_step")) is not None else None,
            expected=str(data.get("expected", "")),
            namespace=str(data.get("namespace", "")),
            ids={str(k): str(v) for k, v in ids.items()} if isinstance(ids := data.get("ids") or {}, dict) else {},
            identities={str(label): {str(k): str(v) for k, v in values.items()}
                        for label, values in identities.items() if isinstance(values, dict)}
            if isinstance(identities := data.get("identities") or {}, dict) else {},
        )


def decide(
    *,
    exception: BaseException | None,
    skipped: bool,
    warned: bool,
    level: Level,
    expected_failure: bool,
    phase: Phase,
) -> Verdict:
    """Map one check's outcome in one phase to its verdict (see the module table)."""
    if phase == "unrun":
        return Verdict.UNTESTABLE
    if skipped or isinstance(exception, NotScored):
        return Verdict.SKIP
    if exception is None:
        if expected_failure and not warned:
            return Verdict.XPASS
        return Verdict.WARN if warned else Verdict.PASS
    if isinstance(exception, Indeterminate):
        return Verdict.UNKNOWN
    if isinstance(exception, Untestable):
        return Verdict.XFAIL if expected_failure else Verdict.UNTESTABLE
    if isinstance(exception, AssertionError | TargetError):  # ShapeError and Departure are AssertionErrors
        if level is Level.SHOULD:
            return Verdict.WARN
        if level is Level.MAY:
            return Verdict.INFO
        if expected_failure:
            return Verdict.XFAIL
        # A set-up step that departs means the check never started: not the requirement failing.
        return Verdict.UNTESTABLE if phase == "setup" else Verdict.FAIL
    return Verdict.ERROR


def replaces(later: Verdict, first: Verdict | None) -> bool:
    """A later phase's verdict replaces the check's first only when there was none or it was a PASS."""
    return first is None or (first is Verdict.PASS and later is not Verdict.PASS)
