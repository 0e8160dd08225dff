"""The retry backoff: upstream's 1 s doubling to 60 s, and no overflow however long it fails."""

from __future__ import annotations

from mcd.kube.backoff import BACKOFF_MAX, Backoff


def test_doubles_from_one_second_to_the_cap() -> None:
    b = Backoff()
    assert [b.next_delay() for _ in range(8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


def test_no_overflow_after_days_of_failures() -> None:
    # 2.0**1024 raises OverflowError: about 17 hours of failed syncs at the 60 s cap reach it
    b = Backoff()
    b.failures = 5000
    assert b.next_delay() == BACKOFF_MAX
    assert b.failures == 5001


def test_retry_after_wins_up_to_the_cap() -> None:
    b = Backoff()
    assert b.next_delay(retry_after=10.0) == 10.0
    assert b.next_delay(retry_after=600.0) == BACKOFF_MAX
