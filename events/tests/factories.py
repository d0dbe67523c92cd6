"""Event jobs for tests, made with the ORM: the job API's `on` and `filter` are the lead's
(web/api/job_serializers.py), and until then job_create starts a first run for every job."""

from typing import Any

from jobs.models import Job, JobType


def event_job(tenant, *, on: str = "invoice.paid", event_filter: dict[str, Any] | None = None, **fields) -> Job:
    """An ACTIVE EVENT job of `tenant` on the event `on`, running `noop` in the default pool."""
    fields.setdefault("name", f"on {on}")
    fields.setdefault("handler", "noop")
    fields.setdefault("pool", "default")
    return Job.objects.create(tenant=tenant, type=JobType.EVENT, event_name=on, event_filter=event_filter, **fields)


def workflow_event_job(tenant, *, on: str = "invoice.paid", **fields) -> Job:
    """An EVENT job whose fire is a run of two steps, `bill` then `mail`."""
    steps = [
        {"name": "bill", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "mail", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["bill"]},
    ]
    return event_job(tenant, on=on, workflow={"steps": steps}, handler="", pool="", **fields)
