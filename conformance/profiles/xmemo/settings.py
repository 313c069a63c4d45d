"""The xmemo profile's settings and the typed view its target is built from.

Identities come, in this order of preference: without a URL, from the embedded reference; else
from bootstrap command templates (``provision.command`` for plain keys, ``provision.bound_command``
for keys bound to an agent), else from ``[[provision.tokens]]``. Each template names ``{owner}``
and ``{token_file}``, may name ``{project}`` and ``{scopes}``; the bound one also ``{agent}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.capabilities import CAPABILITIES, Claim
from conformance.errors import ConfigError
from conformance.profile import EMBEDDED_FACTORY, MAX_BODY_BYTES, TIMEOUT, URL, TargetDescription
from conformance.provisioning import TokenField, TokenList, template_parser, token_list_parser
from conformance.settings import Setting, Settings

__all__ = ["PROVISION_COMMAND", "PROVISION_BOUND_COMMAND", "PROVISION_TOKENS", "SETTINGS", "XMemoSettings",
           "READ_WRITE"]

READ_WRITE = "memory:read,memory:write"

PROVISION_COMMAND: Setting[str | None] = Setting(
    name="provision_command", parse=template_parser(("owner",)), default=None, file_key="provision.command",
    metavar="TEMPLATE", help="bootstrap command with {owner} {token_file}, optionally {project} {scopes}")
PROVISION_BOUND_COMMAND: Setting[str | None] = Setting(
    name="provision_bound_command", parse=template_parser(("owner", "agent")), default=None,
    file_key="provision.bound_command", metavar="TEMPLATE",
    help="bootstrap command for a key bound to an agent: {owner} {agent} {token_file}, optionally {project} {scopes}")
PROVISION_TOKENS: Setting[TokenList] = Setting(
    name="provision_tokens", parse=token_list_parser((
        TokenField(name="owner"), TokenField(name="project", default=""), TokenField(name="agent", default=""),
        TokenField(name="scopes", default=READ_WRITE))),
    default=TokenList(), flag=None, env=None, ini=None, file_key="provision.tokens",
    help="pre-provisioned keys ([[provision.tokens]]: owner, project?, agent?, scopes?, and the key)")

SETTINGS: tuple[Setting[Any], ...] = (URL, PROVISION_COMMAND, PROVISION_BOUND_COMMAND, PROVISION_TOKENS,
                                      EMBEDDED_FACTORY)


@dataclass(frozen=True, slots=True, kw_only=True)
class XMemoSettings:
    """Everything the XMemo target needs, after precedence is applied."""

    url: str | None  # None: the embedded reference
    timeout_s: float
    max_body_bytes: int
    capabilities: Mapping[str, Claim]
    provision_command: str | None
    provision_bound_command: str | None
    fixed_tokens: TokenList
    embedded_factory: str | None  # "module:callable" building an XMemoReference from a path (broken variants)

    @property
    def mode(self) -> str:
        if self.url is None:
            return "embedded"
        return "command" if self.provision_command else "fixed-tokens"

    @classmethod
    def of(cls, settings: Settings) -> XMemoSettings:
        claims = settings[CAPABILITIES]
        return cls(url=settings[URL], timeout_s=settings[TIMEOUT], max_body_bytes=settings[MAX_BODY_BYTES],
                   capabilities=claims, provision_command=settings[PROVISION_COMMAND],
                   provision_bound_command=settings[PROVISION_BOUND_COMMAND],
                   fixed_tokens=settings[PROVISION_TOKENS], embedded_factory=settings[EMBEDDED_FACTORY])


def validate(settings: Settings, config: Any) -> None:
    """A URL needs a way to get keys."""
    view = XMemoSettings.of(settings)
    if view.url is not None and view.provision_command is None and not view.fixed_tokens:
        raise ConfigError(
            f"target {view.url}: say how to get API keys, with a bootstrap command template "
            f"({settings.flag_name(PROVISION_COMMAND)} or [provision] command) or [[provision.tokens]]")


def describe(settings: Settings, config: Any) -> TargetDescription:
    view = XMemoSettings.of(settings)
    templates = tuple((key, template) for key, template in (("agent", view.provision_bound_command),
                                                            ("", view.provision_command)) if template)
    return TargetDescription(target=view.url or "embedded XMemo reference", mode=view.mode, url=view.url,
                             templates=templates, credential_prefix="xmc-")
