"""An execution's tenant has no foreign-key constraint in the database (executions/models.py: its
job's key holds it); deleting a tenant still deletes its jobs and their executions, and nothing
of another tenant's."""

import pytest
from django.db import connection

from executions.models import Execution
from jobs.models import Job

pytestmark = pytest.mark.django_db


def test_the_execution_table_has_no_key_to_the_tenants_but_its_jobs(tenant):
    if connection.vendor != "postgresql":
        pytest.skip("the constraints read from PostgreSQL's catalog")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT confrelid::regclass::text FROM pg_constraint"
            " WHERE conrelid = 'executions_execution'::regclass AND contype = 'f' ORDER BY 1"
        )
        assert [row[0] for row in cursor.fetchall()] == ["executions_run", "jobs_job"]


def test_deleting_a_tenant_deletes_its_executions(tenant, other_tenant, make_job, now):
    other = other_tenant
    kept = make_job(other, run_at=now, now=now).executions.get()
    job = make_job(tenant, type="CRON", schedule="0 * * * *", now=now)
    make_job(tenant, run_at=now, now=now)
    assert Execution.objects.filter(tenant=tenant).count() == 2

    tenant.delete()

    assert list(Execution.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not Job.objects.filter(pk=job.pk).exists()
