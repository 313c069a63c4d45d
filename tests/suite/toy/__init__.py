"""A toy profile whose target is a command line (no URL), to prove the shared parts know no protocol.

It plugs in exactly as a real profile does (see docs/conformance.md, "Writing a profile"): a
declaration, a target started per process, a world per check, requirements and checks.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from conformance.capabilities import CAPABILITIES as CLAIMS
from conformance.capabilities import CORE, Capability, Claims, settle
from conformance.errors import TargetError
from conformance.process import CommandExchange, run_command
from conformance.profile import CLI, MAX_BODY_BYTES, TIMEOUT, CheckContext, Profile, StartContext, TargetDescription
from conformance.provisioning import FunctionProvisioner
from conformance.world import BaseWorld

SCRIPT = str(Path(__file__).with_name("toy_cli.py"))


@dataclass(slots=True)
class ToyTarget:
    argv: tuple[str, ...]
    state: Path
    timeout_s: float
    max_output_bytes: int
    claims: Claims = field(default_factory=Claims)

    def provision(self, identity: Mapping[str, str], token: str) -> bool:
        with (self.state / "tokens").open("a") as tokens:
            tokens.write(token + "\n")
        return True

    def run(self, transcript, token: str, *words: str, actor: str) -> CommandExchange:
        return run_command(transcript, [*self.argv, *words], env={"TOY_STATE": str(self.state), "TOY_TOKEN": token},
                           timeout_s=self.timeout_s, max_output_bytes=self.max_output_bytes, actor=actor)

    def close(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)


@dataclass(slots=True)
class ToyUser:
    world: ToyWorld
    name: str
    token: str

    def run(self, *words: str) -> CommandExchange:
        return self.world.target.run(self.world.transcript, self.token, *words, actor=self.name)


@dataclass(slots=True)
class ToyWorld(BaseWorld):
    target: ToyTarget = field(kw_only=True)

    def user(self, name: str) -> ToyUser:
        token = f"toy-{self.rng.getrandbits(64):016x}"
        self.transcript.secret(token, name)
        FunctionProvisioner(self.target.provision, "the toy state").provision({"user": name}, token)
        return ToyUser(self, name, token)

    def stranger(self) -> ToyUser:
        token = f"toy-{self.rng.getrandbits(64):016x}"
        self.transcript.secret(token, "stranger")
        return ToyUser(self, "stranger", token)


def _start(context: StartContext) -> ToyTarget:
    settings = context.settings
    target = ToyTarget(argv=settings[CLI] or (sys.executable, SCRIPT), state=Path(tempfile.mkdtemp(prefix="toy-")),
                       timeout_s=settings[TIMEOUT], max_output_bytes=settings[MAX_BODY_BYTES])
    probe = ToyWorld(rng=random.Random(0), run_tag="probe", check_tag="probe", target=target)

    def detect(name: str) -> tuple[bool, str]:
        try:
            done = probe.user("probe").run("shout", "probe")
        except TargetError as exc:
            return False, f"probe failed: {exc}"
        return done.exit_code == 0, f"probe 'shout probe' exited {done.exit_code}"

    target.claims = settle(settings[CLAIMS], CAPABILITIES, detect)
    return target


def _world(context: CheckContext) -> ToyWorld:
    return ToyWorld(**BaseWorld.context_fields(context), target=context.target)


def _describe(settings, config) -> TargetDescription:
    command = settings[CLI]
    return TargetDescription(target=" ".join(command) if command else "embedded toy CLI", mode="command line",
                             command=tuple(command) if command else None)


CAPABILITIES = (Capability(name=CORE, covers="echo and tokens"),
                Capability(name="shout", covers="upper-case output", detection="shout exits 0"))

PROFILE = Profile(name="toy", title="Toy", prefix="TOY-", package="tests.suite.toy", checks="tests.suite.toy.checks",
                  capabilities=CAPABILITIES, settings=(CLI,), start=_start, world=_world, describe=_describe)
