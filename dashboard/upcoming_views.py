"""The upcoming-fires page: the next 24 h of fires in 15-minute bars (dashboard/upcoming.py), the
pools' capacity beside them, and the jobs of one bucket (the busiest, or the one clicked: ?bucket=N)."""

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from dashboard.upcoming import BUCKET, BUCKETS, Bucket, upcoming_fires
from dashboard.views import ScopedRequest, _page, operator_view
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
    ticks = [{"at": fires.buckets[i].start} for i in range(0, BUCKETS, BUCKETS // 8)]  # every 3 h
    busiest = sorted((b for b in fires.buckets if b.count), key=lambda b: (-b.count, b.index))[:5]
    return _page(
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
        },
    )
