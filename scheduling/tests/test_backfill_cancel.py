"""scheduling.backfills.backfill_cancel on a backfill that has ended: the API's cancel answers it
as it is; asked with `refuse_ended` (the dashboard's Cancel), it is refused, changing nothing."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from executions.models import Backfill
from scheduling.backfills import BackfillEnded, backfill_cancel, backfill_create

pytestmark = pytest.mark.django_db


def _backfill(make_job, tenant) -> Backfill:
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    return backfill_create(
        job=job,
        start=datetime(2026, 3, 1, tzinfo=UTC),
        end=datetime(2026, 3, 1, 4, tzinfo=UTC),
        order="OLDEST_FIRST",
        reprocess="NONE",
        max_concurrent=1,
        now=timezone.now(),
    )


def test_a_running_backfill_is_cancelled_either_way(make_job, tenant):
    backfill = _backfill(make_job, tenant)
    assert backfill_cancel(backfill=backfill, now=timezone.now(), reason="test", refuse_ended=True).state == "CANCELLED"


def test_an_ended_backfill_is_answered_as_it_is_or_refused_when_asked(make_job, tenant):
    backfill = _backfill(make_job, tenant)
    first = backfill_cancel(backfill=backfill, now=timezone.now(), reason="test")
    again = backfill_cancel(backfill=backfill, now=timezone.now(), reason="test")
    assert (again.state, again.finished_at) == ("CANCELLED", first.finished_at)
    with pytest.raises(BackfillEnded, match=r"the backfill has ended \(CANCELLED\): nothing is left to cancel"):
        backfill_cancel(backfill=backfill, now=timezone.now(), reason="test", refuse_ended=True)
    assert Backfill.objects.get(pk=backfill.pk).finished_at == first.finished_at
