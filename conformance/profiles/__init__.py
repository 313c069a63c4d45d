"""The installed protocol profiles, by name: ``"module:attribute"`` of each ``Profile``.

A new profile adds one line here (see docs/conformance.md, "Writing a profile").
"""

from __future__ import annotations

__all__ = ["PROFILES"]

PROFILES: dict[str, str] = {
    "aidememo": "conformance.profiles.aidememo:PROFILE",
    "aidememo-local": "conformance.profiles.aidememo_local:PROFILE",
    "xmemo": "conformance.profiles.xmemo:PROFILE",
}
