"""The overview charts' time axis (dashboard/overview/time_axis.py): labels on round times, evenly spaced,
midnight by its date; a few spacings offered, finest first, for the page to pick the one that fits."""

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from dashboard.overview.time_axis import label, label_choices


def _buckets(first: datetime, bucket: timedelta, count: int) -> list[datetime]:
    return [first + i * bucket for i in range(count)]


def _spacings(choice, starts):
    return {starts[b] - starts[a] for (a, _), (b, _) in pairwise(choice)}


def test_a_day_of_quarter_hours_is_labelled_on_round_hours_with_the_date_at_midnight():
    """The 24 h range as the overview draws it at 08:41: 96 buckets from 08:45 the day before.
    Every choice is evenly spaced, none labels the last bucket out of step (the old axis ended
    "02:30, 08:15"), and each names the day at midnight."""
    quarter = timedelta(minutes=15)
    starts = _buckets(datetime(2027, 3, 13, 8, 45, tzinfo=UTC), quarter, 96)

    choices = label_choices(starts, quarter)

    assert [len(choice) for choice in choices] == [24, 12, 8, 4, 2]  # every 1, 2, 3, 6, 12 h
    every_3_h = choices[2]
    assert [text for _, text in every_3_h] == [
        "09:00", "12:00", "15:00", "18:00", "21:00", "Sun 03-14", "03:00", "06:00",
    ]  # fmt: skip
    assert every_3_h[0][0] == 1  # 09:00 is the second bucket's start
    for choice in choices:
        assert len(_spacings(choice, starts)) == 1
        assert any(text == "Sun 03-14" for _, text in choice)


def test_a_week_of_two_hours_is_labelled_by_day():
    two_hours = timedelta(hours=2)
    starts = _buckets(datetime(2027, 3, 7, 10, 0, tzinfo=UTC), two_hours, 84)

    choices = label_choices(starts, two_hours)

    daily = [choice for choice in choices if _spacings(choice, starts) == {timedelta(days=1)}]
    assert [text for _, text in daily[0]] == [
        "Mon 03-08", "Tue 03-09", "Wed 03-10", "Thu 03-11", "Fri 03-12", "Sat 03-13", "Sun 03-14",
    ]  # fmt: skip
    # Finest first, and never finer than a bucket or more labels than can be read.
    assert [min(_spacings(choice, starts)) for choice in choices] == sorted(
        min(_spacings(choice, starts)) for choice in choices
    )
    assert all(2 <= len(choice) <= 24 for choice in choices)
    # Every 12 h: midnight by its date, noon by its time.
    assert [text for _, text in choices[0][:3]] == ["12:00", "Mon 03-08", "12:00"]


def test_an_hour_of_minutes_is_labelled_on_round_minutes():
    minute = timedelta(minutes=1)
    starts = _buckets(datetime(2027, 3, 14, 23, 41, tzinfo=UTC), minute, 60)

    choices = label_choices(starts, minute)

    every_10 = next(choice for choice in choices if _spacings(choice, starts) == {timedelta(minutes=10)})
    assert [text for _, text in every_10] == ["23:50", "Mon 03-15", "00:10", "00:20", "00:30", "00:40"]


def test_a_label_is_a_time_of_day_or_at_midnight_the_day():
    assert label(datetime(2027, 3, 14, 0, 0, tzinfo=UTC)) == "Sun 03-14"
    assert label(datetime(2027, 3, 14, 14, 30, tzinfo=UTC)) == "14:30"
