"""Version 1 for every job that existed before versions were kept, from its definition now.

Stored rather than synthesised by the API: the first change of such a job needs a version to
diff against (else its "from" would be lost), the numbers stay what the table says, and the
history has one reader with no special case. Written in chunks with multi-row INSERTs, in
Python rather than as one INSERT … SELECT, so that the definition has exactly the shape
jobs.versions.definition_of gives it (a JSON built in SQL would differ per database, e.g. in how
a time is written, and the first update would then show changes that are not). The shape is
copied here, frozen, as a migration must not import code that will change.
"""

from datetime import UTC

from django.db import migrations
from django.db.models import Exists, OuterRef
from django.utils import timezone

CHUNK = 2000
PRIORITY = {0: "HIGH", 1: "NORMAL", 2: "LOW"}
TIMING = {"ONCE": ("runAt",), "DELAYED": ("delaySec",), "CRON": ("schedule", "timezone")}


def _definition(job) -> dict:
    run_at = job.run_at.astimezone(UTC).isoformat().replace("+00:00", "Z") if job.run_at else None
    timing = {"runAt": run_at, "delaySec": job.delay_sec, "schedule": job.schedule, "timezone": job.timezone}
    return {
        "name": job.name,
        "type": job.type,
        **{name: timing[name] for name in TIMING[job.type]},
        "target": {"pool": job.pool, "handler": job.handler},
        "payload": job.payload,
        "retryPolicy": {
            "maxAttempts": job.max_attempts,
            "backoff": job.backoff,
            "initialDelayMs": job.initial_delay_ms,
            "maxDelayMs": job.max_delay_ms,
            "jitter": job.jitter,
        },
        "timeoutSec": job.timeout_sec,
        "priority": PRIORITY[job.priority],
        "misfirePolicy": job.misfire_policy,
        "concurrencyPolicy": job.concurrency_policy,
    }


def backfill(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    JobVersion = apps.get_model("jobs", "JobVersion")
    now = timezone.now()
    unversioned = Job.objects.filter(~Exists(JobVersion.objects.filter(job_id=OuterRef("pk")))).order_by("pk")
    after = None
    while True:
        chunk = list((unversioned if after is None else unversioned.filter(pk__gt=after))[:CHUNK])
        if not chunk:
            return
        JobVersion.objects.bulk_create(
            JobVersion(job_id=job.pk, number=1, definition=_definition(job), changes=[], actor="migration", created_at=now)
            for job in chunk
        )
        after = chunk[-1].pk


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_job_versions")]

    # The reverse has nothing to undo: reversing 0003 drops the table.
    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
