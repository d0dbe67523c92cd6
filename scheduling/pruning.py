"""What retention deletes besides the executions themselves (transitions.prune_many, which folds
what they counted): the runs and the ended jobs that no execution refers to any more. The sweeper
prunes the executions past the retention first, then these."""

from datetime import datetime

from django.db.models import Exists, OuterRef

from executions.models import Execution, Run
from jobs.models import Job
from jobs.states import TERMINAL as JOB_TERMINAL


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
    """Delete up to `limit` jobs that ended (COMPLETED or CANCELLED) before `before` and have no
    execution left, oldest first, with their versions. The sweeper prunes finished executions
    after the retention, then this: at a constant daily volume of one-off jobs the jobs table
    holds steady too, instead of growing by the day's volume for ever. Reads the partial index
    of ended jobs (job_ended), so the look costs what it finds, not the table's size. It takes
    no execution with it, so the metrics' counters have nothing to fold (executions/tallies.py)."""
    ids = list(
        Job.objects.filter(state__in=JOB_TERMINAL, updated_at__lt=before)
        .exclude(Exists(Execution.objects.filter(job_id=OuterRef("pk"))))
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    if ids:
        Job.objects.filter(pk__in=ids).delete()
    return len(ids)
