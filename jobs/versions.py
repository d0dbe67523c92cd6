"""Versions of a job's definition: what a job is asked to do, kept each time it changes.

A definition is the job's fields that jobs/fields.py's table says its type and kind hold, in the
model's names (`retry_policy.max_attempts`); the API shows them in its own (web/api/job_versions.py).
Versions stored before that were in the API's names: migration 0011 renamed them.

Copy on write: a job's versions are stored from its first change on. Until then its version 1 is
its own row, the definition it was created with (by `created_by`, at `created_at`: `version_one`);
most jobs never change, and a bulk submission of a thousand then writes a thousand jobs, not a
thousand jobs and a copy of each (about a fifth of the database's work of a bulk create, measured).
This holds because job_update (scheduling.job_changes) is the one writer of a job's definition:
the admin and the state changes (pause, resume, cancel) never touch it. It takes the job's version
1 from the row before it changes it and stores it with the next version (`versions_record`).

`versions_record` takes any number of existing jobs and costs two statements (one read of their
latest versions, one multi-row INSERT); job_update and a version's restore call it in their
transactions, after the job row is written.

Numbering under concurrency: the next number is the latest one read plus one. job_update holds
the job's row lock (SELECT … FOR UPDATE) while it calls this, so two updates of one job take
turns and the second reads the first's version once it has committed. The unique (job, number)
constraint is what guarantees it: a writer that did not hold the lock and raced would fail its
INSERT, never write a duplicate number.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from jobs.fields import GROUPS, definition_of
from jobs.models import Job, JobVersion
from jobs.rows import new_row

# The parts of a definition that are objects of their own (jobs/fields.py's groups): a diff names
# their fields one by one ("retry_policy.max_attempts"). A payload is the handler's input and is
# compared whole.
_NESTED = tuple(GROUPS)


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


def version_one(job: Job) -> JobVersion:
    """The job's version 1 as its row holds it (unsaved): right for a job whose definition has
    not changed since it was created, which is every job with no stored version."""
    return new_row(
        JobVersion,
        {
            "job_id": job.pk,
            "number": 1,
            "definition": definition_of(job),
            "changes": [],
            "actor": job.created_by,
            "created_at": job.created_at,
        },
    )


def versions_record(*, jobs: Sequence[Job], actor: str, now: datetime, before: Mapping[Any, JobVersion]) -> None:
    """Record the definition of each job as its next version, in the caller's transaction.

    `before` is each job's `version_one` taken from its row before the change: for a job with no
    stored version it is the version 1 to store with the new one. A job whose definition equals
    its latest version's gets none (an update that changed nothing, and then its version 1 stays
    on its row). Two statements per call, whatever the number of jobs (on SQLite the INSERT is
    split into batches of Django's 999-variable limit). Call it with the jobs already saved and
    their rows locked (job_update does): see the module's docstring.
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
        if previous is None:
            previous = before[job_id]
            if previous.definition == definition:
                continue
            rows.append(previous)  # the first change: the version 1 the row held is stored now
        elif previous.definition == definition:
            continue
        rows.append(
            JobVersion(
                job_id=job_id,
                number=previous.number + 1,
                definition=definition,
                changes=changes_between(previous.definition, definition),
                actor=actor[:200],
                created_at=now,
            )
        )
    if rows:
        JobVersion.objects.bulk_create(rows)


def _stored(job: Job) -> QuerySet[JobVersion]:
    return JobVersion.objects.filter(job=job).order_by("-number")


def versions_stored(*, job: Job) -> QuerySet[JobVersion] | None:
    """A job's stored versions, newest first, or None while it has none (its version 1 is its row):
    for a reader that pages through them in the database. The caller has found the job in its scope."""
    stored = _stored(job)
    return stored if stored.exists() else None


def version_list(*, job: Job) -> list[JobVersion] | QuerySet[JobVersion]:
    """A job's versions, newest first (a query while they are stored). The caller has found the job
    in its scope."""
    stored = versions_stored(job=job)
    return [version_one(job)] if stored is None else stored


def version_get(*, job: Job, number: int) -> JobVersion | None:
    found = _stored(job).filter(number=number).first()
    if found is None and number == 1 and versions_stored(job=job) is None:
        return version_one(job)
    return found


def version_number(*, job: Job) -> int:
    """The number of the version a job is at: its latest stored version's, or 1 while its row is
    its only version (one indexed read of a number, not the definition)."""
    return _stored(job).values_list("number", flat=True).first() or 1


def version_latest(*, job: Job) -> JobVersion:
    return _stored(job).first() or version_one(job)
