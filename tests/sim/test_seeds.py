"""The seed formulas replay files depend on: a recorded plan is replayed under the seeds these
give, so a changed value would replay another interleaving. Values computed by the formulas as
they were when both campaigns had their own copy of ``batch_seed``."""

from __future__ import annotations

import pytest

from simulations.plan import batch_seed, segment_seed
from simulations.xmemo import campaign


@pytest.mark.parametrize(("seed", "index", "expected"), [
    (0, 0, 0),
    (1, 0, 1_000_003),
    (7, 3, 7_000_024),
    (2**40, 1_001, 73_667_279_061_993),
    (123_456_789, 1_000, 123_457_159_371_367),  # the clients race's scheduler seeds start at 1000
    (2**48 - 1, 5, 281_474_975_710_658),  # 48 bits: the product wraps
])
def test_batch_seeds_are_pinned(seed: int, index: int, expected: int) -> None:
    assert batch_seed(seed, index) == expected


def test_the_xmemo_campaign_draws_the_same_seeds() -> None:
    assert campaign.batch_seed is batch_seed


@pytest.mark.parametrize(("seed", "segment", "expected"), [
    (7, 0, 7),  # the first segment is the run's own seed
    (2**40, 2, 73_675_868_995_584),
    (123_456_789, 1, 123_461_454_337_663),
    (2**48 - 1, 2, 8_588_934_589),
])
def test_segment_seeds_are_pinned(seed: int, segment: int, expected: int) -> None:
    assert segment_seed(seed, segment) == expected
