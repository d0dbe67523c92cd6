"""Where the overview's charts (dashboard/overview/charts.py) label their time axis: on round times, evenly
(every 10 min, every 3 h, every day), and each midnight by its date, so that a 24 h or 7 d axis
says which day it shows. The server does not know how wide a chart is drawn; the page does. So
this offers a few spacings, finest first, and app.js draws the finest whose labels fit.
"""

from datetime import UTC, datetime, timedelta

# The spacings an axis may use: each is a whole number of any bucket it is offered for.
STEPS = (
    *(timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30)),
    *(timedelta(hours=h) for h in (1, 2, 3, 6, 12)),
    timedelta(days=1),
    timedelta(days=2),
)
# More labels than this are never readable, however wide the chart.
MAX_LABELS = 24
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def label(at: datetime) -> str:
    """A mark's text: the time of day (14:00), or at midnight the day (Tue 11-25). UTC."""
    at = at.astimezone(UTC)
    return f"{at:%a %m-%d}" if (at.hour, at.minute) == (0, 0) else f"{at:%H:%M}"


def label_choices(starts: list[datetime], bucket: timedelta) -> list[list[tuple[int, str]]]:
    """The ways to label an axis of buckets starting at `starts` (UTC, `bucket` apart), finest
    first: for each spacing of STEPS that is a whole number of buckets and gives 2 to MAX_LABELS
    labels, the labels as (index of the bucket whose start the label marks, text). A label is
    where the time is a multiple of the spacing since midnight (days: since 1970-01-01), so
    every two neighbours are the same time apart."""
    choices = []
    for step in STEPS:
        if step < bucket or step % bucket:
            continue
        marks = [(i, label(at)) for i, at in enumerate(starts) if (at - _EPOCH) % step == timedelta(0)]
        if 2 <= len(marks) <= MAX_LABELS:
            choices.append(marks)
    return choices
