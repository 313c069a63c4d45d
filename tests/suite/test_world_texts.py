"""A world's texts: Faker's own sentences for the world's seeded randomness, the same for the same seed."""

from __future__ import annotations

import random

from faker import Faker

from conformance.world import BaseWorld


def _texts(seed: int, n: int) -> list[str]:
    world = BaseWorld(rng=random.Random(seed), run_tag="r", check_tag="c")
    return [world.text("label") for _ in range(n)]


def test_texts_are_fakers_sentences_for_the_worlds_randomness() -> None:
    faker = Faker()  # the full default-locale Faker, as a user would build it
    for seed in range(40):
        faker.random = random.Random(random.Random(seed).getrandbits(64))
        assert _texts(seed, 5) == [f"label: {faker.sentence(nb_words=6)}" for _ in range(5)]


def test_the_same_seed_gives_the_same_texts_and_another_seed_others() -> None:
    assert _texts(7, 20) == _texts(7, 20)
    assert _texts(7, 20) != _texts(8, 20)
