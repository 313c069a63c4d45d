"""Named credential profiles in ``~/.aidememo/auth.json``, stored as upstream's ``cmd/auth.rs`` does.

The file is ``{"remotes": {URL: {token, added_at}}, "profiles": {NAME: {name, url, project_id,
token, added_at}}}``: URL-keyed legacy tokens beside named profiles, several of which may share
one URL with their own token and project. It is written whole through a temporary file created
with mode 0600 and renamed over the old one, so it is never readable by others, not even for a
moment (upstream chmods after writing).

Beyond upstream: a plain ``http://`` URL is accepted only for a loopback host unless the user
opts in (``allow_insecure_http`` is then stored in the profile; upstream ignores the extra key,
and a profile rewritten by upstream loses it and is refused again); a file that does not parse
is refused instead of being replaced by an empty one.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from refkit.records import distinct
from urllib.parse import urlsplit

from aidememo_wire.ids import id_problem

from ._errors import internal, refusal

__all__ = [
    "AuthFile",
    "RemoteProfile",
    "auth_path",
    "canonical_url",
    "check_transport",
    "load",
    "load_profile",
    "save",
    "validate_identity",
    "validate_profile_name",
    "validate_url",
]

_PROFILE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}\Z")


# Named tuples, not dataclasses: every remote command reads a profile, and importing
# dataclasses (it loads inspect) costs a remote read about a tenth of its run.
@distinct
class RemoteProfile(NamedTuple):
    """One named identity on one server; ``repr`` never shows the token."""

    name: str
    url: str
    project_id: str
    token: str
    added_at: int
    allow_insecure_http: bool = False

    def __repr__(self) -> str:
        return (f"RemoteProfile(name={self.name!r}, url={self.url!r}, project_id={self.project_id!r},"
                f" token=[redacted], added_at={self.added_at})")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "url": self.url, "project_id": self.project_id,
                                "token": self.token, "added_at": self.added_at}
        if self.allow_insecure_http:
            data["allow_insecure_http"] = True
        return data


@distinct
class AuthFile(NamedTuple):
    """The whole file: legacy URL tokens and named profiles (both maps are changed in place)."""

    remotes: dict[str, dict[str, Any]]
    profiles: dict[str, RemoteProfile]

    def to_json(self) -> dict[str, Any]:
        # Upstream's field order (remotes, then profiles); its maps are BTreeMaps: sorted keys.
        return {"remotes": {url: self.remotes[url] for url in sorted(self.remotes)},
                "profiles": {name: self.profiles[name].to_json() for name in sorted(self.profiles)}}


def auth_path(env: Mapping[str, str]) -> str:
    home = env.get("HOME")
    if not home:
        raise refusal("HOME env var not set — can't resolve ~/.aidememo/auth.json")
    return os.path.join(home, ".aidememo", "auth.json")


def canonical_url(url: str) -> str:
    return url.rstrip("/")


def validate_url(url: str) -> str:
    key = canonical_url(url.strip())
    if not key or any(ch.isspace() for ch in key) or not key.startswith(("http://", "https://")):
        raise refusal("remote URL must be an absolute http:// or https:// URL without whitespace")
    return key


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_transport(url: str, allow_insecure_http: bool) -> None:
    """Refuse plain HTTP to anything but loopback unless the user opted in (beyond upstream)."""
    if not url.startswith("http://") or allow_insecure_http:
        return
    host = urlsplit(url).hostname or ""
    if not _loopback(host):
        raise refusal(f"remote URL {url} uses plain http:// for a non-loopback host; use https:// or pass"
                      " --allow-insecure-http to `aidememo auth login`")


def validate_profile_name(value: str) -> str:
    name = value.strip()
    if not _PROFILE_NAME.match(name) or not name.isascii():
        raise refusal("profile name must contain 1 to 64 ASCII letters, digits, '-', '_', or '.'")
    return name


def validate_identity(flag: str, value: str) -> str:
    text = value.strip()
    if id_problem(text) is not None:
        raise refusal(f"{flag} contains an invalid server identity")
    return text


def _profile(name: str, data: object, where: str) -> RemoteProfile:
    if not isinstance(data, dict):
        raise refusal(f"{where}: profile {name!r} is not an object")
    try:
        profile = RemoteProfile(name=str(data["name"]), url=str(data["url"]), project_id=str(data["project_id"]),
                                token=str(data["token"]), added_at=int(data["added_at"]),
                                allow_insecure_http=data.get("allow_insecure_http") is True)
    except (KeyError, TypeError, ValueError):
        raise refusal(f"{where}: profile {name!r} lacks name, url, project_id, token or added_at") from None
    return profile


def load(path: str) -> AuthFile:
    """The file's contents; a missing file is empty, an unreadable one is refused."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return AuthFile({}, {})
    except OSError as exc:
        raise internal(f"read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError:
        raise refusal(f"{path} is not valid JSON; fix or remove it (nothing was changed)") from None
    if not isinstance(data, dict):
        raise refusal(f"{path} is not a JSON object; fix or remove it (nothing was changed)")
    remotes = data.get("remotes") or {}
    profiles = data.get("profiles") or {}
    if not isinstance(remotes, dict) or not isinstance(profiles, dict):
        raise refusal(f"{path}: remotes and profiles must be objects")
    return AuthFile(dict(remotes), {name: _profile(name, value, path) for name, value in profiles.items()})


def save(path: str, store: AuthFile) -> None:
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        temporary = path + ".tmp"
        if os.path.lexists(temporary):
            os.remove(temporary)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(store.to_json(), indent=2, ensure_ascii=False))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        raise internal(f"write {path}: {exc.strerror}") from exc


def load_profile(name: str, env: Mapping[str, str]) -> RemoteProfile:
    """The named profile, checked for use (project id grammar, transport)."""
    wanted = validate_profile_name(name)
    profile = load(auth_path(env)).profiles.get(wanted)
    if profile is None:
        raise refusal(f"remote profile `{wanted}` was not found; run `aidememo auth login <URL> --profile {wanted}"
                      " --project-id <PROJECT> --token-file <PATH>`")
    if id_problem(profile.project_id) is not None:
        raise refusal("project_id is not a valid remote identifier")
    check_transport(profile.url, profile.allow_insecure_http)
    return profile
