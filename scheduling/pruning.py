"""What retention deletes besides the executions themselves (transitions.prune_many, which folds
what they counted): the runs and the ended jobs that no execution refers to any more. The sweeper
prunes the executions past the retention first, then these."""

from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from executions.models import Execution, Run
from jobs.models import ONE_OFF_TYPES, Job
from jobs.states import StoredJobState


def runs_prune(*, before: datetime, limit: int) -> int:
    """Delete up to `limit` runs made before `before` whose executions are all gone (the sweeper
    prunes finished executions after the retention, then this). Returns how many. It takes no
    execution with it, so the metrics' counters have nothing to fold (executions/tallies.py)."""
    ids = list(
        Run.objects.filter(created_at__lt=before)
        .exclude(Exists(Execution.objects.filter(run_id=OuterRef("pk"))))
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    if ids:
        Run.objects.filter(pk__in=ids).delete()
    return len(ids)


def jobs_prune(*, before: datetime, limit: int) -> int:
    """Delete up to `limit` jobs that ended before `before` and have no execution left, oldest
    first, with their versions: the cancelled, and the one-offs (COMPLETED, which is read: an
    ACTIVE or PAUSED one-off with no execution left has none that can run). The sweeper prunes
    finished executions after the retention, then this: at a constant daily volume of one-off
    jobs the jobs table holds steady too, instead of growing by the day's volume for ever. Reads
    the partial index of the jobs that end (job_ending), so the look costs what it finds and the
    one-offs still running from before `before`, not the table's size. It takes no execution
    with it, so the metrics' counters have nothing to fold (executions/tallies.py)."""
    ids = list(
        Job.objects.filter(Q(state=StoredJobState.CANCELLED) | Q(type__in=ONE_OFF_TYPES), updated_at__lt=before)
        .exclude(Exists(Execution.objects.filter(job_id=OuterRef("pk"))))
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    if ids:
        Job.objects.filter(pk__in=ids).delete()
    return len(ids)
