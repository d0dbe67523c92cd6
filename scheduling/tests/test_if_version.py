"""scheduling.job_changes: a change asked of a job at a version (the API's If-Match) is made only if
the job is still at it, checked under the job's row lock, so that of two writers that read the
same version one wins and the other is refused (StaleVersion), never both."""

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection

from jobs.models import Job
from jobs.versions import version_number
from scheduling.job_changes import StaleVersion, job_cancel, job_pause, job_resume, job_update
from tenants.services import tenant_create

NOW = datetime(2031, 3, 14, 9, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_a_change_asked_of_the_current_version_is_made_and_of_another_refused(make_job):
    tenant = tenant_create(slug="acme")
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    job = job_update(job=job, fields={"name": "second"}, now=NOW, if_version={1})
    assert version_number(job=job) == 2

    with pytest.raises(StaleVersion) as refused:
        job_update(job=job, fields={"name": "third"}, now=NOW, if_version={1})
    assert refused.value.current == 2
    assert str(refused.value) == f"job {job.pk} is at version 2; the change was asked of version 1"
    for change in (job_pause, job_resume, job_cancel):
        with pytest.raises(StaleVersion):
            change(job=job, now=NOW, if_version=frozenset())
    assert Job.objects.get(pk=job.pk).name == "second"
    assert Job.objects.get(pk=job.pk).standing == "ACTIVE"

    paused = job_pause(job=job, now=NOW, if_version={1, 2})
    assert paused.state == "PAUSED" and version_number(job=paused) == 2  # a state change keeps the version
    assert job_resume(job=job, now=NOW, if_version={2}).state == "ACTIVE"
    assert job_cancel(job=job, now=NOW, if_version=None).state == "CANCELLED"  # None: any version


@pytest.mark.django_db(transaction=True)
def test_of_two_writers_at_the_same_version_one_wins_and_the_other_is_refused(make_job):
    """Eight threads, each with its own connection, update one job at once, each asking for
    version 1: exactly one update is made (version 2), the seven others are refused."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks and concurrent connections: PostgreSQL (DATABASE_URL)")
    tenant = tenant_create(slug="acme")
    job = make_job(tenant, type="CRON", schedule="0 * * * *")
    threads = 8
    barrier = threading.Barrier(threads)
    made: list[int] = []
    refused: list[int] = []
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            job_update(job=job, fields={"name": f"name {index}"}, now=datetime.now(UTC), if_version={1})
            made.append(index)
        except StaleVersion:
            refused.append(index)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)

    assert not errors, errors
    assert len(made) == 1 and len(refused) == threads - 1
    assert Job.objects.get(pk=job.pk).name == f"name {made[0]}"
    assert version_number(job=job) == 2
