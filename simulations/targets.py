"""Targets from the conformance suite's target file, so both tools aim at a server the same way.

The file format and its precedence rules belong to the conformance suite's AideMemo profile
(``conformance.profiles.aidememo.settings``); this module only
turns resolved settings into the simulator's ``HttpTarget``: it provisions fresh actors with the
file's command template, or picks the writers (and a reader, if any) among its fixed tokens.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from simulations.concurrency import READER, HttpTarget
from simulations.errors import SimulationError

__all__ = ["target_from_config"]


def target_from_config(path: Path, actors: int = 3) -> HttpTarget | None:
    """The target a conformance target file names; None when it names the embedded reference.

    Raises:
        SimulationError: for a bad file, a failed provisioning, or too few writer tokens.
    """
    from conformance.errors import ConfigError, Untestable
    from conformance.profiles.aidememo.settings import target_settings
    from conformance.provisioning import CommandProvisioner

    try:
        settings = target_settings(str(path))
    except ConfigError as exc:
        raise SimulationError(str(exc)) from exc
    if settings.url is None:
        return None
    if settings.provision_command is not None:
        project = f"sim-{secrets.token_hex(4)}"
        tokens: dict[str, str] = {}
        provisioner = CommandProvisioner(settings.provision_command)
        names = [f"agent-{chr(ord('a') + i)}" for i in range(actors)] + [READER]
        try:
            for name in names:
                token = f"sim-{secrets.token_hex(16)}"
                tokens[name] = provisioner.provision({"tenant": "sim-tenant", "project": project, "actor": name,
                                                      "role": "reader" if name == READER else "writer"}, token)
        except Untestable as exc:
            raise SimulationError(str(exc)) from exc
        finally:
            provisioner.close()
        return HttpTarget(settings.url, project, tokens, timeout_s=settings.timeout_s)
    by_project: dict[str, dict[str, str]] = {}
    for fixed in settings.fixed_tokens:
        # The reader's actor id never matters to the model (it is never a participant), so it
        # goes under the simulator's observer name.
        name = READER if fixed["role"] == "reader" else fixed["actor"]
        by_project.setdefault(fixed["project"], {}).setdefault(name, fixed.token)
    for project, tokens in by_project.items():
        if sum(name != READER for name in tokens) >= 2:
            return HttpTarget(settings.url, project, tokens, timeout_s=settings.timeout_s)
    raise SimulationError(f"{path}: the simulator needs at least two writer tokens in one project")
