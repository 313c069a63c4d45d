"""What every profile's world shares: seeded ids and texts, warnings, the transcript.

A profile's world subclasses ``BaseWorld`` and adds the identities and verbs of its protocol.
Ids come from the run tag, the check's tag, a counter and the check's seeded ``rng``, so the
same seed replays the same requests whatever the order or the xdist split.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from conformance.profile import CheckContext
from conformance.transcript import Transcript

__all__ = ["BaseWorld"]


@dataclass(slots=True)
class BaseWorld:
    """One check's seeded randomness, warnings and transcript."""

    rng: random.Random
    run_tag: str
    check_tag: str
    transcript: Transcript = field(default_factory=Transcript)
    warnings: list[str] = field(default_factory=list)
    _counter: int = 0
    _faker: Any = None

    @classmethod
    def context_fields(cls, context: CheckContext) -> dict[str, Any]:
        """The base fields of a world built from ``context`` (for a subclass's constructor)."""
        return {"rng": context.rng, "run_tag": context.run_tag, "check_tag": context.check_tag,
                "transcript": context.transcript}

    def new_id(self, prefix: str) -> str:
        """A fresh id, unique within the run and reproducible from the seed."""
        self._counter += 1
        return f"{prefix}-{self.check_tag}-{self._counter}-{self.rng.getrandbits(32):08x}"

    def text(self, what: str) -> str:
        """A realistic, seeded sentence labelled ``what``."""
        if self._faker is None:
            from faker import Faker  # imported only when a check runs: the plugin must cost nothing idle

            self._faker = Faker()
            self._faker.seed_instance(self.rng.getrandbits(64))
        return f"{what}: {self._faker.sentence(nb_words=6)}"

    def warn(self, message: str) -> None:
        """Record a tolerated departure; a passing check with warnings reads as WARN."""
        self.warnings.append(message)
