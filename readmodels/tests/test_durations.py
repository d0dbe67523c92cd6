"""Spans of time as people read them (readmodels/durations.py): the dashboard's delays, timeouts
and relative times, the reasons to wait and the alerts' summaries all say them so."""

import pytest

from readmodels.durations import duration, from_now, milliseconds


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (55533, "15 h 25 min"),  # a DELAYED job's delay, once "+55533 s"
        (0, "0 s"),
        (0.7, "0 s"),
        (-3, "0 s"),
        (59.9, "59 s"),  # cut, never rounded up to a later time
        (60, "1 min"),
        (125, "2 min 5 s"),
        (3599, "59 min 59 s"),
        (3600, "1 h"),
        (7260, "2 h 1 min"),
        (7261, "2 h 1 min"),  # two units at most
        (86400, "1 d"),
        (90000, "1 d 1 h"),
        (3 * 86400 + 300, "3 d"),  # the second unit is 0 h: the minutes are past the two largest
        (604800, "7 d"),
    ],
)
def test_a_duration_is_its_two_largest_units(seconds, shown):
    assert duration(seconds) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 ms"),
        (840.6, "840 ms"),
        (999.9, "999 ms"),
        (1000, "1.0 s"),
        (12_549, "12.5 s"),
        (59_999, "59.9 s"),
        (60_000, "1 min"),
        (3_600_000, "1 h"),  # a retry policy's maxDelayMs, once "3600000 ms"
        (5_400_500, "1 h 30 min"),
    ],
)
def test_milliseconds_keep_a_tenth_of_a_second_under_a_minute(value, shown):
    assert milliseconds(value) == shown


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(90, "1 min 30 s"), (3725, "1 h 2 min 5 s"), (3605, "1 h 5 s"), (86400, "1 d"), (1, "1 s"), (0, "0 s")],
)
def test_a_period_is_said_in_full(seconds, text):
    from readmodels.durations import period

    assert period(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.3, "in under a second"), (0.999, "in under a second"), (1, "in 1 s"), (125.5, "in 2 min 5 s"), (0, "in 0 s")],
)
def test_a_wait_ahead_under_a_second_is_not_called_0_s(seconds, shown):
    """A rate limit's next turn is mostly a fraction of a second away: "in 0 s" read as a stall."""
    assert from_now(seconds) == shown
