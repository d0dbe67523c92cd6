"""insert_new writes each row's values, whichever of its columns hold one value for every row
(sent once on PostgreSQL) and whichever differ: property-tested on both databases."""

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.models import Job, JobType
from store import store
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

RUN_AT = datetime(2030, 1, 1, tzinfo=UTC)

# Per field, values that are equal or not across rows: nulls, texts, times in other offsets
# (one instant), JSON that compares equal in Python but is other JSON ({"a": 1}, {"a": True}).
FIELD_VALUES = {
    "name": st.sampled_from(["nightly", "nightly ", "n\u00e9", "x" * 200]),
    "run_at": st.sampled_from([RUN_AT, RUN_AT.astimezone(timezone(timedelta(hours=2))), RUN_AT + timedelta(1)]),
    "idempotency_key": st.sampled_from([None, "k#0", "k#1"]),
    "payload": st.sampled_from([{}, {"a": 1}, {"a": True}, {"a": 1.0}, [1], {"b": None}]),
    "priority": st.sampled_from([0, 1, 2]),
    "jitter": st.booleans(),
    "event_filter": st.sampled_from([None, {"a": 1}]),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.fixed_dictionaries(FIELD_VALUES), min_size=1, max_size=6))
def test_each_row_is_written_with_its_own_values(rows):
    tenant, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "Acme"})
    Job.objects.all().delete()
    jobs = [
        Job(id=uuid.uuid4(), tenant=tenant, type=JobType.ONCE, pool="default", handler="noop", **fields)
        for fields in rows
    ]
    # An idempotency key once per tenant: the same key on two rows is not what this is about.
    seen: set = set()
    for job in jobs:
        if job.idempotency_key in seen:
            job.idempotency_key = None
        seen.add(job.idempotency_key)
    store().insert_new(jobs)
    written = {job.id: job for job in Job.objects.all()}
    assert len(written) == len(jobs)
    for job in jobs:
        got = written[job.id]
        for name in FIELD_VALUES:
            value, stored = getattr(job, name), getattr(got, name)
            # repr: {"a": 1} stays 1, neither True nor 1.0; a time the same instant.
            assert stored == value if name == "run_at" else repr(stored) == repr(value), name
        assert got.created_at == job.created_at and got.updated_at == job.updated_at
