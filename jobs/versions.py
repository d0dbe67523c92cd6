"""Versions of a job's definition: what a job is asked to do, kept each time it changes.

The writers are set-based. `versions_first` makes the version 1 of jobs being created (nothing
to read: executions.scheduling inserts them with the jobs, in one statement however many).
`versions_record` takes any number of existing jobs and costs two statements (one read of their
latest versions, one multi-row INSERT); job_update and a version's restore call it in their
transactions, after the job row is written.

Numbering under concurrency: the next number is the latest one read plus one. job_update holds
the job's row lock (SELECT … FOR UPDATE) while it calls this, so two updates of one job take
turns and the second reads the first's version once it has committed; a job being created is
visible to nobody else yet. The unique (job, number) constraint is what guarantees it: a writer
that did not hold the lock and raced would fail its INSERT, never write a duplicate number.
"""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from jobs.models import Job, JobType, JobVersion, Priority
from jobs.rows import new_row

# The parts of a definition that are objects of their own: a diff names their fields one by one
# ("retryPolicy.maxAttempts"). A payload is the handler's input and is compared whole.
_NESTED = ("target", "retryPolicy")
# Which timing fields a job of each type has; the others are not part of its definition (a
# DELAYED job's runAt is computed from its delay when it is created or its delay changes).
_TIMING: dict[str, tuple[str, ...]] = {
    JobType.ONCE: ("runAt",),
    JobType.DELAYED: ("delaySec",),
    JobType.CRON: ("schedule", "timezone"),
    JobType.EVENT: (),
}


def _instant(value: datetime | None) -> str | None:
    # As the API writes a time: ISO 8601 in UTC, ending in Z.
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def definition_of(job: Job) -> dict[str, Any]:
    """The job's definition as the API names its fields: what a PUT may change, plus its type.
    Not its state, next fire, timestamps or idempotency key: those are not what it was asked to do."""
    timing = {
        "runAt": _instant(job.run_at),
        "delaySec": job.delay_sec,
        "schedule": job.schedule,
        "timezone": job.timezone,
    }
    # A workflow job's steps carry its targets and payloads; an EVENT job's event is its timing.
    what: dict[str, Any] = (
        {"workflow": job.workflow} if job.workflow else {"target": {"pool": job.pool, "handler": job.handler}}
    )
    if not job.workflow:
        what["payload"] = job.payload
    if job.type == JobType.EVENT:
        what.update(on=job.event_name, filter=job.event_filter)
    return {
        "name": job.name,
        "type": job.type,
        **{name: timing[name] for name in _TIMING[job.type]},
        **what,
        "retryPolicy": {
            "maxAttempts": job.max_attempts,
            "backoff": job.backoff,
            "initialDelayMs": job.initial_delay_ms,
            "maxDelayMs": job.max_delay_ms,
            "jitter": job.jitter,
        },
        "timeoutSec": job.timeout_sec,
        "priority": Priority(job.priority).label,
        "misfirePolicy": job.misfire_policy,
        "concurrencyPolicy": job.concurrency_policy,
    }


def _leaves(definition: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in definition.items():
        if name in _NESTED and isinstance(value, dict):
            flat.update({f"{name}.{inner}": inner_value for inner, inner_value in value.items()})
        else:
            flat[name] = value
    return flat


def changes_between(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """What changed from `old` to `new`: [{"field", "from", "to"}], in the definition's order,
    nested fields by their dotted name; a field one side lacks is null on that side."""
    before, after = _leaves(old), _leaves(new)
    names = [*after, *(name for name in before if name not in after)]
    return [
        {"field": name, "from": before.get(name), "to": after.get(name)}
        for name in names
        if before.get(name) != after.get(name)
    ]


def _latest_of(job_ids: list[Any]) -> dict[Any, JobVersion]:
    """The latest version of each of the jobs, in one statement (the unique index on (job,
    number) answers each job's newest number)."""
    newest = JobVersion.objects.filter(job_id=OuterRef("job_id")).order_by("-number").values("number")[:1]
    rows = JobVersion.objects.filter(job_id__in=job_ids, number=Subquery(newest)).only("job_id", "number", "definition")
    return {row.job_id: row for row in rows}


def versions_first(*, jobs: Sequence[Job], actor: str, now: datetime) -> list[JobVersion]:
    """Version 1 of each of the jobs, unsaved: what a job being created starts with. Nothing is
    read, since a job that does not exist yet has no version (the caller inserts the rows with
    the jobs, in their transaction: executions.scheduling)."""
    return [
        new_row(
            JobVersion,
            {
                "job_id": job.pk,
                "number": 1,
                "definition": definition_of(job),
                "changes": [],
                "actor": actor[:200],
                "created_at": now,
            },
        )
        for job in jobs
    ]


def versions_record(*, jobs: Sequence[Job], actor: str, now: datetime) -> None:
    """Record the definition of each job as its next version, in the caller's transaction.

    A job whose definition equals its latest version's gets none (an update that changed
    nothing); a job with no version yet gets version 1, with no changes. Two statements per
    call, whatever the number of jobs (on SQLite the INSERT is split into batches of Django's
    999-variable limit). Call it with the jobs already saved, and, for an existing job, with
    its row locked (job_update does): see the module's docstring.
    """
    if not jobs:
        return
    # A job named twice is recorded once, as it is last given.
    by_id = {job.pk: job for job in jobs}
    latest = _latest_of(list(by_id))
    rows = []
    for job_id, job in by_id.items():
        definition = definition_of(job)
        previous = latest.get(job_id)
        if previous is not None and previous.definition == definition:
            continue
        rows.append(
            JobVersion(
                job_id=job_id,
                number=previous.number + 1 if previous else 1,
                definition=definition,
                changes=changes_between(previous.definition, definition) if previous else [],
                actor=actor[:200],
                created_at=now,
            )
        )
    if rows:
        JobVersion.objects.bulk_create(rows)


def version_list(*, job: Job) -> QuerySet[JobVersion]:
    """A job's versions, newest first. The caller has found the job in its scope."""
    return JobVersion.objects.filter(job=job).order_by("-number")


def version_get(*, job: Job, number: int) -> JobVersion | None:
    return JobVersion.objects.filter(job=job, number=number).first()


def version_latest(*, job: Job) -> JobVersion | None:
    return version_list(job=job).first()
