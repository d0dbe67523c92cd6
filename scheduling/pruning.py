"""What retention deletes besides the executions themselves (transitions.prune_many, which folds
what they counted): the runs and the ended jobs that no execution refers to any more. The sweeper
prunes the executions past the retention first, then these."""

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef

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


def jobs_prune(*, before: datetime, limit: int, pruned_jobs: Collection[Any] = ()) -> int:
    """Delete the jobs that ended and have no execution left, with their versions and runs, and
    return how many:

    - the one-offs among `pruned_jobs` (the jobs of the executions prune_many just deleted, in
      the caller's transaction): a one-off's COMPLETED is read, not written (executions/standing.py),
      so it is found by its executions as they go, all of them, whatever `limit`;
    - up to `limit` cancelled jobs, cancelled before `before`, oldest first: the partial index of
      the cancelled (job_ended) makes the look cost what it finds, not the table's size.

    The sweeper prunes finished executions after the retention, then this: at a constant daily
    volume of one-off jobs the jobs table holds steady too, instead of growing by the day's
    volume for ever. It takes no execution with it, so the metrics' counters have nothing to fold
    (executions/tallies.py)."""
    left = Exists(Execution.objects.filter(job_id=OuterRef("pk")))
    one_offs = list(
        Job.objects.filter(pk__in=list(pruned_jobs), type__in=ONE_OFF_TYPES).exclude(left).values_list("pk", flat=True)
    )
    cancelled = list(
        Job.objects.filter(state=StoredJobState.CANCELLED, updated_at__lt=before)
        .exclude(left)
        .exclude(pk__in=one_offs)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    ids = [*one_offs, *cancelled]
    if ids:
        Job.objects.filter(pk__in=ids).delete()
    return len(ids)
