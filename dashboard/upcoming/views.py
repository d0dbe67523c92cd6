"""The upcoming-fires page: the next 24 h of fires in 15-minute bars (dashboard/upcoming/fires.py), the
pools' capacity beside them, and the jobs of one bucket (the busiest, or the one clicked: ?bucket=N)."""

from datetime import datetime, timedelta

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from dashboard.frame import ScopedRequest, operator_view, render_page
from dashboard.upcoming.fires import BUCKET, BUCKETS, MAX_JOBS, MAX_SCHEDULES, Bucket, upcoming_fires
from executions.clock import db_now

# The timeline's drawing box (SVG user units; it scales to the page's width).
WIDTH, HEIGHT = BUCKETS * 10, 120  # a bar is 8 wide in its 10


@require_GET
@operator_view
def upcoming(request: ScopedRequest) -> HttpResponse:
    now = db_now()
    fires = upcoming_fires(scope=request.tenant_scope, now=now)
    chosen: Bucket | None
    try:
        chosen = fires.buckets[int(request.GET["bucket"])]
    except (KeyError, ValueError, IndexError):
        chosen = fires.peak
    top = max((b.count for b in fires.buckets), default=0) or 1
    bars = [
        {
            "bucket": b,
            "x": b.index * 10 + 1,
            "height": round(b.count / top * (HEIGHT - 4)) if b.count else 0,
            "y": HEIGHT - (round(b.count / top * (HEIGHT - 4)) if b.count else 0),
            "chosen": chosen is not None and b.index == chosen.index,
        }
        for b in fires.buckets
    ]
    ticks = _ticks(fires.start)
    busiest = sorted((b for b in fires.buckets if b.count), key=lambda b: (-b.count, b.index))[:5]
    return render_page(
        request,
        "dashboard/upcoming.html",
        {
            "section": "upcoming",
            "fires": fires,
            "bars": bars,
            "ticks": ticks,
            "chosen": chosen,
            "chosen_end": chosen.start + BUCKET if chosen is not None else None,
            "busiest": busiest,
            "width": WIDTH,
            "height": HEIGHT,
            "max_jobs": MAX_JOBS,
            "max_schedules": MAX_SCHEDULES,
        },
    )


def _ticks(start: datetime) -> list[dict]:
    """A label at each whole 3 hours of UTC in the window, placed where that instant falls on the
    drawing (a share of its width, as the bars are), midnight's with its date: the 24 hours span
    two dates. None within 6 % of either edge, where half a label would run off a 390 px drawing."""
    span = BUCKETS * BUCKET
    at = start.replace(minute=0, second=0, microsecond=0)
    if at < start:
        at += timedelta(hours=1)
    at += timedelta(hours=-at.hour % 3)
    ticks = []
    while at < start + span:
        left = (at - start) / span * 100
        if 6 <= left <= 94:
            ticks.append({"at": at, "left": round(left, 3), "midnight": at.hour == 0})
        at += timedelta(hours=3)
    return ticks
