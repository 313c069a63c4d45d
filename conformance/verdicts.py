"""Verdicts: what a check's pytest outcome means for its requirement.

The table (outcome x level x baseline -> verdict) is here and nowhere else:

    passed, no warning                      -> PASS    (XPASS when the baseline expected a failure)
    passed with a recorded warning          -> WARN
    AssertionError / TargetError, MUST      -> FAIL    (XFAIL when the baseline lists it)
    AssertionError / TargetError, SHOULD    -> WARN
    AssertionError / TargetError, MAY       -> INFO
    Untestable (setup step failed)          -> UNTESTABLE (XFAIL when the baseline lists it)
    NotScored / capability unclaimed        -> SKIP
    Indeterminate (only 503 answers)        -> UNKNOWN
    KeyError/TypeError/... after an answer  -> as AssertionError: the answer lacked a promised field
    any other exception (a bug in a check)  -> ERROR

Only PASS, WARN, INFO, SKIP and XFAIL let the run succeed; XPASS means the baseline is stale.
"""

from __future__ import annotations

from enum import StrEnum

from conformance.errors import Indeterminate, NotScored, TargetError, Untestable
from conformance.registry import Level

__all__ = ["Verdict", "decide"]


class Verdict(StrEnum):
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


# What checks raise when an answer is JSON of the wrong shape (a missing key, a string where an
# object was promised): the server's departure, not the kit's, once the server has answered.
SHAPE_ERRORS = (KeyError, TypeError, IndexError, AttributeError, ValueError)


def decide(
    *,
    exception: BaseException | None,
    skipped: bool,
    warned: bool,
    level: Level,
    expected_failure: bool,
    answered: bool = False,
) -> Verdict:
    """Map one check's outcome to its verdict (see the module table).

    Args:
        answered: the target answered at least one of the check's requests.
    """
    if skipped or isinstance(exception, NotScored):
        return Verdict.SKIP
    if exception is None:
        if expected_failure:
            return Verdict.XPASS
        return Verdict.WARN if warned else Verdict.PASS
    if isinstance(exception, Indeterminate):
        return Verdict.UNKNOWN
    if isinstance(exception, Untestable):
        return Verdict.XFAIL if expected_failure else Verdict.UNTESTABLE
    if isinstance(exception, AssertionError | TargetError) or (answered and isinstance(exception, SHAPE_ERRORS)):
        if level is Level.SHOULD:
            return Verdict.WARN
        if level is Level.MAY:
            return Verdict.INFO
        return Verdict.XFAIL if expected_failure else Verdict.FAIL
    return Verdict.ERROR
