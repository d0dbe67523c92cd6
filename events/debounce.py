"""Debounce (Inngest's): the events that match a debounced EVENT job (`debounce_sec`,
`debounce_max_sec`) fold into one run instead of starting one each. The run is an ordinary PENDING
execution, due when the events stop: `debounce_sec` after the last one, and at the latest
`debounce_max_sec` after the first. Each event that comes before it is due folds into it, moves
it later (the named re-timing, executions/retiming.refold) and becomes the event its handler is
told of; the handler also gets how many folded and their ids (events/selectors.event_for_handler).
Once the run is due, the next event opens a new window. docs/events.md, "Debounce"."""

from datetime import datetime, timedelta

from django.db.models import Min

from events.models import DebouncedEvent, Event
from executions import retiming
from executions.models import Execution, Origin
from executions.states import ExecutionState
from jobs.models import Job
from scheduling import runs


def closes_at(*, opened: datetime, now: datetime, quiet: int, longest: int | None) -> datetime:
    """When a window opened at `opened` closes, an event having arrived at `now`: `quiet` seconds
    after it, and never later than `longest` seconds after the window opened."""
    close = now + timedelta(seconds=quiet)
    if longest is not None:
        close = min(close, opened + timedelta(seconds=longest))
    return max(close, now)


def fold(*, job: Job, event: Event, now: datetime) -> Execution:
    """The run of `job` that `event` joins, or opens: called in the event's transaction, with the
    job's row locked (events.services._matching_jobs), so that the events of one job take turns
    and two of them never open two windows."""
    assert job.debounce_sec is not None and not job.workflow
    window = (
        Execution.objects.filter(
            job_id=job.pk,
            origin=Origin.EVENT,
            state=ExecutionState.PENDING,
            attempt=1,
            started_at__isnull=True,
            run__isnull=True,
            # Still open: a run already due (waiting for its claim) is not moved later.
            scheduled_for__gte=now,
        )
        .order_by("-created_at")
        .first()
    )
    if window is not None:
        # The window opened with its first event (its row's own time is the database's clock).
        first = DebouncedEvent.objects.filter(execution_id=window.pk).aggregate(at=Min("event__received_at"))["at"]
        opened = first or window.created_at
        fire = closes_at(opened=opened, now=now, quiet=job.debounce_sec, longest=job.debounce_max_sec)
        # False: a dispatcher claimed it meanwhile (the window closed): this event opens another.
        if retiming.refold(execution_id=window.pk, fire=fire, event_id=event.pk, now=now):
            DebouncedEvent.objects.create(event=event, execution_id=window.pk)
            window.refresh_from_db()
            return window
    fire = closes_at(opened=now, now=now, quiet=job.debounce_sec, longest=job.debounce_max_sec)
    execution = runs.fire(job=job, scheduled_for=fire, now=now, origin=Origin.EVENT, event_id=event.pk).executions[0]
    DebouncedEvent.objects.create(event=event, execution_id=execution.pk)
    return execution
