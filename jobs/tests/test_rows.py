"""new_row makes the instance Django's constructor makes, for any of the fields it is given."""

import uuid
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.models import AuditEntry
from executions.models import Execution
from jobs.models import Job, JobVersion
from jobs.rows import _defaults_of, new_row
from tenants.models import Tenant

WHEN = datetime(2030, 1, 1, tzinfo=UTC)
TENANT = Tenant(id=7, slug="acme", name="Acme")
JOB = Job(tenant=TENANT, name="nightly", type="CRON", schedule="0 0 * * *", pool="default", handler="noop")

# A value for each field a create sets, by the name it is given under (a relation by its object
# or by its id).
GIVEN = {
    Job: {
        "tenant": TENANT,
        "name": "nightly",
        "type": "CRON",
        "schedule": "H 0 * * *",
        "timezone": "Europe/Paris",
        "payload": {"a": [1, 2]},
        "pool": "reports",
        "handler": "noop",
        "priority": 2,
        "next_fire_at": WHEN,
        "idempotency_key": "k#1",
        "request_fingerprint": "f" * 64,
    },
    Execution: {
        "job": JOB,
        "tenant_id": 7,
        "pool": "default",
        "priority": 1,
        "origin": "SCHEDULE",
        "scheduled_for": WHEN,
        "available_at": WHEN,
        "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
    },
    JobVersion: {"job_id": uuid.uuid4(), "number": 1, "definition": {"name": "x"}, "changes": [], "actor": "token t"},
    AuditEntry: {"at": WHEN, "actor": "token t", "action": "job.create", "target_type": "job", "tenant_id": 7},
}


def _comparable(row) -> tuple[dict, dict]:
    made = {attname for attname, _ in _defaults_of(type(row)).made}
    values = {k: v for k, v in row.__dict__.items() if k != "_state" and k not in made}
    return values, {k: type(v) for k, v in row.__dict__.items() if k in made}


@settings(max_examples=150, deadline=None)
@given(model=st.sampled_from(list(GIVEN)), data=st.data())
def test_new_row_is_the_constructors_instance(model, data):
    names = data.draw(st.sets(st.sampled_from(sorted(GIVEN[model]))))
    values = {name: GIVEN[model][name] for name in names}
    ours, django = new_row(model, values), model(**values)
    assert _comparable(ours) == _comparable(django)
    assert ours._state.adding and ours._state.db is None
    assert ours._state.fields_cache == django._state.fields_cache
    if "job" in values:
        assert ours.job is JOB and ours.job_id == JOB.pk


def test_each_row_has_its_own_made_values():
    first, second = new_row(Job, {"name": "a"}), new_row(Job, {"name": "b"})
    assert first.pk != second.pk
    assert first.payload == {} and first.payload is not second.payload
