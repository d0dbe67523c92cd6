"""Writes on events: receive one (store it and start what it matches, in one transaction), and
prune old ones."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from events import debounce
from events.matching import filter_matches
from events.models import Event
from executions.models import Origin
from jobs.models import Job, JobType
from jobs.states import JobState
from scheduling import runs
from scheduling.job_creation import IdempotencyConflict, request_fingerprint
from tenants.models import Tenant

# How long an idempotency key is honoured at the least: its event row holds it, so events are never
# pruned sooner than this, whatever the executions' retention (events_prune).
IDEMPOTENCY_WINDOW = timedelta(hours=24)
MIN_RETENTION = 2 * IDEMPOTENCY_WINDOW


@dataclass(frozen=True)
class Received:
    event: Event
    created: bool  # False: a replay of an earlier request under the same idempotency key


def event_receive(
    *,
    tenant: Tenant,
    name: str,
    payload: dict[str, Any],
    source: str,
    now: datetime,
    idempotency_key: str | None = None,
) -> Received:
    """Store the event and start one run (scheduling.runs.fire, origin EVENT, due at `now`) of each
    ACTIVE event job of `tenant` that it matches: its `on` is `name` and its filter matches
    `payload` (events.matching). Guarantees:
    - one transaction: the event, its runs and their executions commit together or not at all, and
      the event row records what was started (`matched`, `execution_ids`, `run_ids`), in a stable
      order (the jobs by creation, a workflow's executions in its order of steps);
    - a paused or cancelled job is not started, nor one of another tenant;
    - a debounced job's run is not started but joined while it waits (events/debounce.py): the
      event row names the execution it joined, as one it started;
    - with an idempotency key, a repeat (the same name and payload) returns the first event and
      starts nothing, even when the two race: the unique index on (tenant, key) lets one insert
      win, and the others wait on it and then read it. The key with another name or payload raises
      IdempotencyConflict. A key is kept as long as its event (at least IDEMPOTENCY_WINDOW).
    """
    fingerprint = request_fingerprint({"name": name, "payload": payload})
    if idempotency_key and (existing := _event_by_key(tenant=tenant, key=idempotency_key, fingerprint=fingerprint)):
        return Received(existing, created=False)
    try:
        with transaction.atomic():
            # The event first: a racing twin's insert under the same key waits on this row and
            # fails once it commits, before the twin has started anything.
            event = Event.objects.create(
                tenant=tenant,
                name=name,
                payload=payload,
                source=source,
                received_at=now,
                idempotency_key=idempotency_key or None,
                request_fingerprint=fingerprint,
            )
            fired = [
                runs.Fired(None, [debounce.fold(job=job, event=event, now=now)])
                if job.debounce_sec
                else runs.fire(job=job, scheduled_for=now, now=now, origin=Origin.EVENT, event_id=event.pk)
                for job in _matching_jobs(tenant=tenant, name=name, payload=payload)
            ]
            event.matched = len(fired)
            event.execution_ids = [str(execution.pk) for run in fired for execution in run.executions]
            event.run_ids = [str(run.run_id) for run in fired if run.run_id is not None]
            event.save(update_fields=["matched", "execution_ids", "run_ids"])
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = _event_by_key(tenant=tenant, key=idempotency_key, fingerprint=fingerprint)
        if existing is None:
            raise
        return Received(existing, created=False)
    return Received(event, created=True)


def _matching_jobs(*, tenant: Tenant, name: str, payload: dict[str, Any]) -> list[Job]:
    """The tenant's ACTIVE event jobs on `name` whose filter `payload` satisfies, oldest first.

    Their rows are locked (FOR NO KEY UPDATE, as a trigger locks its job) until the event commits:
    a cancel or pause of one of them waits for the event, or the event waits for it and then
    finds the job no longer ACTIVE (PostgreSQL evaluates the filter again on the locked row).
    Without the lock an event could start a run of a job cancelled meanwhile, which nothing would
    ever claim or cancel. Events on one job take turns for the length of their transactions."""
    candidates = (
        Job.objects.select_for_update(no_key=True)
        .filter(tenant=tenant, type=JobType.EVENT, event_name=name, state=JobState.ACTIVE)
        .order_by("created_at", "id")
    )
    return [job for job in candidates if filter_matches(job.event_filter, payload)]


def _event_by_key(*, tenant: Tenant, key: str, fingerprint: str) -> Event | None:
    event = Event.objects.filter(tenant=tenant, idempotency_key=key).first()
    if event is not None and event.request_fingerprint != fingerprint:
        raise IdempotencyConflict(f"Idempotency-Key '{key}' was already used with another event name or payload")
    return event


def events_prune(*, now: datetime, retention: timedelta, limit: int) -> int:
    """Delete up to `limit` events received more than `retention` before `now`, oldest first,
    reading the index on received_at; never one younger than MIN_RETENTION, so that an idempotency
    key holds for IDEMPOTENCY_WINDOW at least whatever the retention. What they started is left
    alone: executions have their own retention, and a run whose event is gone is told so (its
    handler's event is None)."""
    before = now - max(retention, MIN_RETENTION)
    ids = list(
        Event.objects.filter(received_at__lt=before).order_by("received_at").values_list("pk", flat=True)[:limit]
    )
    if ids:
        Event.objects.filter(pk__in=ids).delete()
    return len(ids)
