"""Capability claims: what a target says (or is found) to serve, and what a check needs.

A profile names its optional capabilities; ``core`` is every profile's and always claimed. A
target claims each one as true, false or "auto" (the flag/variable grammar is
``search,-mcp,leases=auto``, the target file's a ``[capabilities]`` table), and what is left to
"auto" is decided by the profile's probes when the target starts. A check of an unclaimed
capability is not scored (``NotScored``), never counted as a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from conformance.errors import ConfigError, NotScored
from conformance.settings import ParseContext, Setting

__all__ = ["CAPABILITIES", "CORE", "Capability", "Claims", "parse_claims", "settle"]

CORE = "core"

Claim = bool | None  # None: detect with the profile's probe


@dataclass(frozen=True, slots=True, kw_only=True)
class Capability:
    """An optional part of a protocol a target may serve."""

    name: str
    covers: str  # what its requirements cover (docs and listings)
    detection: str = ""  # how "auto" is decided; empty when it cannot be detected


def _claim(value: object, where: str) -> Claim:
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in {"true", "yes", "on", "1"}:
        return True
    if text in {"false", "no", "off", "0"}:
        return False
    if text == "auto":
        return None
    raise ConfigError(f"{where}: expected true, false or \"auto\", got {value!r}")


def _known(name: str, where: str, context: ParseContext) -> str:
    if context.capabilities and name not in context.capabilities:
        raise ConfigError(f"{where}: unknown capability {name!r} (known: {', '.join(context.capabilities)})")
    return name


def parse_claims(value: object, where: str, context: ParseContext) -> dict[str, Claim]:
    """``search,-mcp,leases=auto`` (or a list of such, or a TOML table) -> claims by name."""
    claims: dict[str, Claim] = {}
    if isinstance(value, dict):
        for name, claim in value.items():
            claims[_known(name, where, context)] = _claim(claim, f"{where}.{name}")
    elif isinstance(value, str | list):
        for text in [value] if isinstance(value, str) else value:
            if not isinstance(text, str):
                raise ConfigError(f"{where}: expected capability names, got {text!r}")
            for raw in text.split(","):
                item = raw.strip()
                if not item:
                    continue
                if item.startswith("-"):
                    claims[_known(item[1:], where, context)] = False
                elif "=" in item:
                    name, _, flag = item.partition("=")
                    claims[_known(name.strip(), where, context)] = _claim(flag, where)
                else:
                    claims[_known(item, where, context)] = True
    else:
        raise ConfigError(f"{where}: expected a [capabilities] table or a list like 'search,-mcp'")
    if claims.get(CORE) is False:
        raise ConfigError(f"{where}: capability 'core' cannot be disclaimed")
    return claims


def _merge(low: dict[str, Claim], high: dict[str, Claim]) -> dict[str, Claim]:
    return {**low, **high}


def _render(claims: dict[str, Claim]) -> list[str]:
    words = [name if claim else f"-{name}" if claim is False else f"{name}=auto" for name, claim in claims.items()]
    return [",".join(words)] if words else []


CAPABILITIES: Setting[dict[str, Claim]] = Setting(
    name="capabilities", flag="capability", action="append", parse=parse_claims, merge=_merge, default={},
    render=_render,
    metavar="CAPS", help="claim or disclaim capabilities: 'search', '-mcp', 'leases=auto'; comma lists; repeatable",
)


@dataclass(slots=True)
class Claims:
    """The settled claims of one started target."""

    claims: dict[str, bool] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)  # name -> "declared", "detected: probe ... answered 200"

    def claimed(self, name: str) -> bool:
        return name == CORE or self.claims.get(name, False)

    def require(self, name: str) -> None:
        """Raises ``NotScored`` unless the target claims the capability."""
        if not self.claimed(name):
            raise NotScored(f"capability {name!r} not claimed by the target ({self.how.get(name, 'not claimed')})")

    def describe(self) -> dict[str, str]:
        """``name -> "claimed, declared"``-style lines for reports."""
        shown = {CORE: "claimed, always"}
        for name, how in self.how.items():
            shown[name] = ("claimed, " if self.claimed(name) else "not claimed, ") + how
        return shown


def settle(
    declared: Mapping[str, Claim],
    capabilities: Sequence[Capability],
    detect: Callable[[str], tuple[bool, str]],
) -> Claims:
    """Declared claims win; the rest are decided by ``detect(name) -> (served, how)``."""
    claims = Claims()
    for capability in capabilities:
        if capability.name == CORE:
            continue
        claim = declared.get(capability.name)
        if claim is not None:
            claims.claims[capability.name] = claim
            claims.how[capability.name] = "declared" if claim else "declared absent"
            continue
        served, how = detect(capability.name)
        claims.claims[capability.name] = served
        claims.how[capability.name] = f"detected: {how}"
    return claims
