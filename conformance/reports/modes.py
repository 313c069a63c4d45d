"""The words a run header uses for its mode: where the run's identities come from."""

from __future__ import annotations

__all__ = ["explain_mode"]

# What the run header's mode says: where the run's identities come from, and how leases expire.
_MODES = {
    "embedded": "the reference started for this run provisions the identities",
    "command": "identities made by the target's bootstrap command template",
    "fixed-tokens": "identities from the target file's token list",
    "provision hook": "identities made by a conftest's provisioning hook",
    "real-time leases": "lease expiry waited for in real time",
}


def explain_mode(mode: str) -> str:
    """``command`` -> ``command: identities made by the target's bootstrap command template``."""
    return "; ".join(f"{part}: {_MODES[part]}" if part in _MODES else part for part in mode.split(", "))
