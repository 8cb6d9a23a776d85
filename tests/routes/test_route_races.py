"""Fire vs cancel of the same route timer row on PostgreSQL with real threads: each row has
exactly one fate, and both orders happen (200 trials here; 1,000 in benchmarks/route_races.py,
the numbers in benchmarks/JOURNAL.md)."""

from __future__ import annotations

import pytest

from tests.routes.racing import race_fire_and_cancel
from tests.routes.recording import Recorder

TRIALS = 200


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("chunk", [1, 8])
def test_fire_racing_cancel_gives_each_route_row_exactly_one_fate(
    recorder: type[Recorder], chunk: int
) -> None:
    """``chunk`` 8: a chunk fire (one transaction for 8 rows) against the steps that cancel
    those rows one by one."""
    fates = race_fire_and_cancel(TRIALS, chunk=chunk)
    assert fates["fired"] + fates["cancelled"] == TRIALS
    print(f"\nfire vs cancel, {TRIALS} trials, chunks of {chunk}: {dict(fates)}")
    assert fates["fired"] > 0 and fates["cancelled"] > 0, fates  # both orders observed
