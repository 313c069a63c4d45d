"""What every profile's world shares: namespaced ids, seeded texts, warnings, the transcript.

A profile's world subclasses ``BaseWorld`` and adds the identities and verbs of its protocol.
Two things are kept apart:

* the *seed* fixes what a check sends: its texts and every choice drawn from ``rng``, whatever
  the order or the xdist split;
* the *namespace* (the run tag, fresh for every run unless ``--run-tag`` fixes it) makes every id
  a check creates (tenant, project, actors, sessions, handoffs, command ids) new, and credentials
  are drawn afresh from ``secrets``, never from the seed.

So a rerun with the same seed sends the same requests into new identities on a target that kept
the data of the first run, and never meets that run's receipts or token bindings.
"""

from __future__ import annotations

import random
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from conformance.profile import CheckContext
from conformance.transcript import Transcript

__all__ = ["BaseWorld", "minted_id", "new_credential"]


def new_credential(prefix: str) -> str:
    """A new credential, from ``secrets``: never derived from the seed or the namespace, both printed."""
    return f"{prefix}{secrets.token_hex(16)}"


_FAKERS: list[Any] = []  # the process's one text generator
# Held while the one generator draws for a world: checks run ahead in threads (conformance.overlap)
# would otherwise draw from each other's randomness.
_FAKER_LOCK = threading.Lock()


def _faker() -> Any:
    """Faker's generator with only the provider a world draws from (``Faker()`` imports and registers
    some 25 for the default locale); its sentences are ``Faker().sentence``'s for the same randomness."""
    if not _FAKERS:
        # Imported only when a check runs: the plugin must cost nothing idle.
        from faker import Generator
        from faker.providers.lorem.en_US import Provider as Lorem

        generator = Generator()
        generator.add_provider(Lorem)
        _FAKERS.append(generator)
    return _FAKERS[0]


def minted_id(prefix: str, run_tag: str, check_tag: str, n: int) -> str:
    """The ``n``-th id a check mints: what ``BaseWorld.new_id`` returns (and what a profile predicts)."""
    return f"{prefix}-{run_tag}-{check_tag}-{n}"


@dataclass(slots=True)
class BaseWorld:
    """One check's seeded randomness, warnings and transcript."""

    rng: random.Random
    run_tag: str
    check_tag: str
    transcript: Transcript = field(default_factory=Transcript)
    warnings: list[str] = field(default_factory=list)
    _counter: int = 0
    _faker: random.Random | None = None  # this world's texts' randomness (Faker draws from it)

    @classmethod
    def context_fields(cls, context: CheckContext) -> dict[str, Any]:
        """The base fields of a world built from ``context`` (for a subclass's constructor)."""
        return {"rng": context.rng, "run_tag": context.run_tag, "check_tag": context.check_tag,
                "transcript": context.transcript}

    def new_id(self, prefix: str) -> str:
        """A new id in this run's namespace: ``PREFIX-RUNTAG-CHECKTAG-N`` (the same N-th id for the same check)."""
        self._counter += 1
        minted = minted_id(prefix, self.run_tag, self.check_tag, self._counter)
        self.transcript.minted(minted, self.run_tag)
        return minted

    def fresh_credential(self, prefix: str) -> str:
        """A new credential, from ``secrets``: never derived from the seed or the namespace, both printed."""
        return new_credential(prefix)

    def text(self, what: str) -> str:
        """A realistic, seeded sentence labelled ``what``."""
        if self._faker is None:
            # What seed_instance does to a Faker of its own: a Random seeded so. Each world keeps
            # its own, so worlds built ahead (and their interleaved texts) draw what they drew alone.
            self._faker = random.Random(self.rng.getrandbits(64))
        with _FAKER_LOCK:
            faker = _faker()
            faker.random = self._faker
            return f"{what}: {faker.sentence(nb_words=6)}"

    def warn(self, message: str) -> None:
        """Record a tolerated departure; a passing check with warnings reads as WARN."""
        self.warnings.append(message)
