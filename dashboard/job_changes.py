"""Job-level changes (pause, resume, edit, cancel, …) for the live feed, read from the audit log.

Every change to a job by any actor (the dashboard, an API token, the admin) leaves one OK row in
the audit log, in the change's own transaction (audit/services.py, web/audit.py, web/admin.py):
so the log's primary key is a cursor over job changes just as ExecutionEvent's is over execution
changes, and reading it is a range scan of a few rows. What is sent is the job's state as the
database has it now, not what the row says happened: the page re-renders from the database anyway.
"""

from typing import Any

from django.db.models import Max

from audit.models import AuditEntry, AuditOutcome
from executions import standing
from executions.clock import db_now
from jobs.models import Job
from store import store


def latest_audit_id() -> int:
    """The newest audit row's id: where a page's job feed starts."""
    return AuditEntry.objects.aggregate(top=Max("id"))["top"] or 0


def live_cursors() -> tuple[int, int, float]:
    """Where a page's live feed starts: the newest execution event's id and the newest audit
    row's, in one statement (each a walk of one primary key entry), and the database's time
    (seconds since the epoch) read before them, where its derived events start (they have no id:
    store/history.py); every page renders them."""
    at = db_now().timestamp()
    event_id, audit_id = store().live_cursors()
    return event_id, audit_id, at


def job_changes_after(*, scope: list[int] | None, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """Changes to jobs recorded after audit row `after`, oldest first, in the caller's scope:
    {id (the audit row's), jobId, tenantId, action, state (the job's now; null once deleted)}."""
    rows = AuditEntry.objects.filter(pk__gt=after, target_type="job", outcome=AuditOutcome.OK, job_id__isnull=False)
    if scope is not None:
        rows = rows.filter(tenant_id__in=scope)
    changes = list(rows.order_by("id").values("id", "job_id", "tenant_id", "action")[:limit])
    jobs = list(Job.objects.filter(pk__in={row["job_id"] for row in changes}).only("pk", "state", "type", "updated_at"))
    standing.attach(jobs)
    states: dict[Any, str] = {job.pk: job.standing for job in jobs}
    return [
        {
            "id": row["id"],
            "jobId": str(row["job_id"]),
            "tenantId": row["tenant_id"],
            "action": row["action"],
            "state": states.get(row["job_id"]),
        }
        for row in changes
    ]
