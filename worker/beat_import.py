"""django-celery-beat's schedules brought over in one command (`manage.py import_beat`; README,
"Migrating from django-celery-beat").

The source is read from its own tables (django-celery-beat 2.x's `django_celery_beat_*`) through
a database connection made for the command, so django-celery-beat need not be installed here.
Each PeriodicTask becomes one job named after it, targeting the `celery` handler on the named
bridge with the task's name, args, kwargs and queue:

- crontab → CRON in the crontab's timezone. Its fields are expanded by Celery's own parser, so
  beat's numbering (Sunday 0 or 7, day names) and ranges (wrapping ones too) mean what they meant
  to beat. Beat fires a crontab when its day of month *and* its day of week match; cron (and so
  Tickwork) when either does, if both are restricted: such a crontab is skipped, with the reason.
- interval → INTERVAL: `everySec` = every * period, anchored where beat would fire next (its last
  run + the period, else its start time, else an interval from now).
- clocked → ONCE at the clocked time (one that already ran is skipped).
- `one_off` → one fire (ONCE at the schedule's next fire), or skipped when it already ran;
  `start_time` → no fire before it; `enabled = false` → the job is created PAUSED.
- solar schedules, and fields Tickwork cannot express (`expires`, `priority`, `exchange`,
  `routing_key`, `headers`), are named in the report, never dropped silently.

A second run updates the jobs it made (matched by name, `created_by` "import_beat") and creates
no duplicates; a job's paused or active state is left as the operator set it. Each job created or
updated has its audit row (job.create, job.update) in the same transaction, with actor kind `cli`:
the operating system's user who ran the command.
"""

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from celery.schedules import crontab
from django.db.utils import ConnectionHandler, OperationalError
from django.utils.dateparse import parse_datetime

from audit.services import Actor, Target, audited
from jobs import cron
from jobs.models import Job, JobType
from jobs.recurrence import Cron, Interval, first_fire
from jobs.states import ENDED as JOB_ENDED
from scheduling.job_changes import job_pause, job_update
from scheduling.job_creation import job_create
from tenants.models import Tenant

ACTOR = "import_beat"
_PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}
# The columns read from django_celery_beat_periodictask, joined with its schedule's.
SOURCE_QUERY = """
SELECT t.id, t.name, t.task, t.args, t.kwargs, t.queue, t.exchange, t.routing_key, t.headers,
       t.priority, t.expires, t.expire_seconds, t.one_off, t.start_time, t.enabled, t.last_run_at,
       c.minute, c.hour, c.day_of_month, c.month_of_year, c.day_of_week, c.timezone,
       i.every, i.period, k.clocked_time, s.event
FROM django_celery_beat_periodictask t
LEFT JOIN django_celery_beat_crontabschedule c ON c.id = t.crontab_id
LEFT JOIN django_celery_beat_intervalschedule i ON i.id = t.interval_id
LEFT JOIN django_celery_beat_clockedschedule k ON k.id = t.clocked_id
LEFT JOIN django_celery_beat_solarschedule s ON s.id = t.solar_id
ORDER BY t.name
"""


@dataclass(frozen=True)
class BeatTask:
    """A PeriodicTask as its tables hold it (SOURCE_QUERY's columns, in order)."""

    id: int
    name: str
    task: str
    args: str | None
    kwargs: str | None
    queue: str | None
    exchange: str | None
    routing_key: str | None
    headers: str | None
    priority: int | None
    expires: datetime | None
    expire_seconds: int | None
    one_off: bool
    start_time: datetime | None
    enabled: bool
    last_run_at: datetime | None
    minute: str | None = None
    hour: str | None = None
    day_of_month: str | None = None
    month_of_year: str | None = None
    day_of_week: str | None = None
    timezone: str | None = None
    every: int | None = None
    period: str | None = None
    clocked_time: datetime | None = None
    solar_event: str | None = None


@dataclass
class Plan:
    """What becomes of one task: the job's fields (None: skipped, `skip` says why), whether it
    is created PAUSED, and what of the task the job does not carry."""

    name: str
    fields: dict[str, Any] | None = None
    paused: bool = False
    skip: str = ""
    notes: list[str] = field(default_factory=list)
    # An interval that beat has neither run nor given a start: its first fire is counted from the
    # import, so a later import keeps the job's own anchor rather than move it.
    floating_start: bool = False


def plan_of(task: BeatTask, *, bridge: str, now: datetime) -> Plan:
    plan = Plan(name=task.name)
    try:
        args, kwargs = _json(task.args, list, "args"), _json(task.kwargs, dict, "kwargs")
        timing = _timing(task, now=now)
    except _Skip as exc:
        plan.skip = str(exc)
        return plan
    payload: dict[str, Any] = {"bridge": bridge, "task": task.task, "args": args, "kwargs": kwargs}
    if task.queue:
        payload["queue"] = task.queue
    # Every timing field, the other types' empty: a task whose schedule changed kind (crontab to
    # interval) leaves nothing of the old one on its job.
    blank = {"run_at": None, "schedule": "", "timezone": "UTC", "every_sec": None, "start_at": None}
    plan.fields = {
        "name": task.name[:200],
        "pool": "default",
        "handler": "celery",
        "payload": payload,
        **blank,
        **timing,
    }
    plan.floating_start = timing["type"] == JobType.INTERVAL and task.last_run_at is None and task.start_time is None
    plan.paused = not task.enabled
    plan.notes = _not_carried(task)
    return plan


class _Skip(Exception):
    pass


def _json(text: str | None, kind: type, name: str) -> Any:
    try:
        value = json.loads(text) if text and text.strip() else kind()
    except ValueError as exc:
        raise _Skip(f"its {name} are not JSON ({exc})") from None
    if not isinstance(value, kind):
        raise _Skip(f"its {name} are not a JSON {'list' if kind is list else 'object'}")
    return value


def _aware(value: datetime | None) -> datetime | None:
    """Beat's times as read: aware, or naive in UTC (USE_TZ=True databases store UTC)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _timing(task: BeatTask, *, now: datetime) -> dict[str, Any]:
    """The job's type and timing fields, or _Skip with why none fits."""
    start, last_run = _aware(task.start_time), _aware(task.last_run_at)
    if task.solar_event is not None:
        raise _Skip(f"solar schedule ({task.solar_event}): Tickwork has no sun-based schedules")
    if task.clocked_time is not None:
        if last_run is not None:
            raise _Skip(f"clocked task already ran at {last_run.isoformat()}")
        return {"type": JobType.ONCE, "run_at": _aware(task.clocked_time)}
    if task.every is not None:
        seconds = task.every * _PERIOD_SECONDS.get(task.period or "", 0)
        if seconds < 1 or seconds != int(seconds):
            raise _Skip(f"interval of {task.every} {task.period}: Tickwork's intervals are whole seconds, at least 1")
        every = timedelta(seconds=int(seconds))
        # Where beat would fire next: a period after its last run, at its start time, or a
        # period from now (beat counts a new interval task's first period from its own start).
        anchor = last_run + every if last_run is not None else start if start is not None else now + every
        if task.one_off:
            if last_run is not None:
                raise _Skip(f"one-off task already ran at {last_run.isoformat()}")
            return {"type": JobType.ONCE, "run_at": max(anchor, now)}
        return {"type": JobType.INTERVAL, "every_sec": int(seconds), "start_at": anchor}
    if task.minute is not None:
        expression = crontab_expression(task)
        zone = str(task.timezone or "UTC")
        try:
            cron.parse_timezone(zone)
            cron.validate(expression)
        except cron.CronError as exc:
            raise _Skip(f"crontab {expression} in {zone}: {exc}") from None
        if task.one_off:
            if last_run is not None:
                raise _Skip(f"one-off task already ran at {last_run.isoformat()}")
            after = max(now, start - timedelta(microseconds=1)) if start is not None else now
            return {"type": JobType.ONCE, "run_at": Cron(expression, zone).next_fire(after)}
        return {"type": JobType.CRON, "schedule": expression, "timezone": zone, "start_at": start}
    raise _Skip("no schedule (none of crontab, interval, clocked or solar is set)")


def crontab_expression(task: BeatTask) -> str:
    """The five cron fields a beat crontab means, expanded by Celery's own parser. _Skip when
    both day fields are restricted: beat wants both to match, cron either."""
    try:
        parsed: Any = crontab(  # celery-types leaves out the expanded sets (minute, hour, …)
            minute=task.minute or "*",
            hour=task.hour or "*",
            day_of_week=task.day_of_week or "*",
            day_of_month=task.day_of_month or "*",
            month_of_year=task.month_of_year or "*",
        )
    except ValueError as exc:
        raise _Skip(f"crontab not understood by Celery: {exc}") from None
    fields = [
        _field(parsed.minute, 0, 59),
        _field(parsed.hour, 0, 23),
        _field(parsed.day_of_month, 1, 31),
        _field(parsed.month_of_year, 1, 12),
        _field(parsed.day_of_week, 0, 6),
    ]
    if fields[2] != "*" and fields[4] != "*":
        raise _Skip(
            f"day_of_month {task.day_of_month!r} and day_of_week {task.day_of_week!r} are both restricted: beat "
            "fires when both match, cron when either does, so no cron expression means the same"
        )
    # Beat's own text where cron reads it the same way: "*/15" stays "*/15", which (unlike the
    # list it stands for) runs by elapsed time across a DST change, as the docs say of "*" fields.
    texts = [task.minute, task.hour, task.day_of_month, task.month_of_year, task.day_of_week]
    kept = [
        text.strip()
        if text and rendered != "*" and _PLAIN_FIELD.fullmatch(text.strip()) and not _wraps(text)
        else rendered
        for text, rendered in zip(texts, fields, strict=True)
    ]
    try:
        cron.validate(" ".join(kept))
        return " ".join(kept)
    except cron.CronError:
        return " ".join(fields)


_PLAIN_FIELD = re.compile(r"[0-9*/,-]+")


def _wraps(text: str) -> bool:
    """A range that wraps ("5-1"): Celery reads it around the end, cron not at all."""
    return any(int(a) > int(b) for a, b in re.findall(r"(\d+)-(\d+)", text))


def _field(values: set[int], low: int, high: int) -> str:
    """A set of values as a cron field: "*" when it is every value, else ranges and singles."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    spans: list[list[int]] = []
    for value in ordered:
        if spans and value == spans[-1][1] + 1:
            spans[-1][1] = value
        else:
            spans.append([value, value])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _not_carried(task: BeatTask) -> list[str]:
    """What of the task the job will not do, each with why."""
    notes = []
    if task.expires is not None or task.expire_seconds:
        notes.append(
            "expires not carried: a Tickwork fire does not expire (misfirePolicy decides what a late one does)"
        )
    if task.priority is not None:
        notes.append(f"priority {task.priority} not carried: the job has Tickwork's NORMAL priority")
    if task.exchange:
        notes.append(f"exchange {task.exchange!r} not carried: the message goes to the queue's own exchange")
    if task.routing_key:
        notes.append(f"routing_key {task.routing_key!r} not carried: the queue's name is the routing key")
    headers = (task.headers or "").strip()
    if headers not in ("", "{}", "null"):
        notes.append("headers not carried: Tickwork sends its own (tickwork_execution_id, …)")
    if task.one_off and task.clocked_time is None:
        notes.append("one_off: imported as a single run (ONCE)")
    return notes


def describe(fields: dict[str, Any]) -> str:
    """A job's timing and target in a report line."""
    kind = fields["type"]
    if kind == JobType.CRON:
        when = f"CRON {fields['schedule']!r} {fields['timezone']}"
        if fields.get("start_at"):
            when += f" from {fields['start_at'].isoformat()}"
    elif kind == JobType.INTERVAL:
        when = f"INTERVAL every {fields['every_sec']} s from {fields['start_at'].isoformat()}"
    else:
        when = f"ONCE at {fields['run_at'].isoformat()}"
    payload = fields["payload"]
    queue = f" on queue {payload['queue']}" if payload.get("queue") else ""
    return f"{when} → {payload['task']}{queue}"


def first_fire_of(fields: dict[str, Any], now: datetime) -> datetime:
    """The job's first fire, for the report."""
    if fields["type"] == JobType.CRON:
        return first_fire(Cron(fields["schedule"], fields["timezone"]), now=now, start=fields.get("start_at"))
    if fields["type"] == JobType.INTERVAL:
        interval = Interval(every=timedelta(seconds=fields["every_sec"]), start=fields["start_at"])
        return first_fire(interval, now=now, start=fields["start_at"])
    return fields["run_at"]


# --- reading the source and writing the jobs --------------------------------------------------------


def read_source(url: str) -> list[BeatTask]:
    """The PeriodicTasks of the database at `url` (any database Django speaks), through a
    connection of the command's own."""
    connection = _source_connection(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(SOURCE_QUERY)
            rows = cursor.fetchall()
    finally:
        connection.close()
    return [BeatTask(*(_value(v) for v in row)) for row in rows]


def _source_connection(url: str):
    """A connection of the command's own to `url`. SQLite would create a file that is not there
    and then report "no such table": a mistyped path is said as what it is."""
    config = dj_database_url.parse(url)
    if config["ENGINE"].endswith("sqlite3") and config["NAME"] != ":memory:" and not Path(config["NAME"]).is_file():
        raise OperationalError(f"no SQLite file at {config['NAME']}")
    return ConnectionHandler({"default": config})["default"]


def _value(value: Any) -> Any:
    """SQLite hands times back as text."""
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] in " T":
        parsed = parse_datetime(value)
        return parsed if parsed is not None else value
    return value


def disable_source(url: str, task_ids: list[int], *, now: datetime) -> int:
    """enabled = false on the imported tasks, and beat's change marker bumped so that a running
    beat reloads its schedule (a restart is surer: the docs say to restart it)."""
    if not task_ids:
        return 0
    connection = _source_connection(url)
    try:
        with connection.cursor() as cursor:
            marks = ", ".join(["%s"] * len(task_ids))
            cursor.execute(
                f"UPDATE django_celery_beat_periodictask SET enabled = %s WHERE id IN ({marks})", [False, *task_ids]
            )
            changed = cursor.rowcount
            cursor.execute("UPDATE django_celery_beat_periodictasks SET last_update = %s WHERE ident = 1", [now])
            if cursor.rowcount == 0:
                cursor.execute(
                    "INSERT INTO django_celery_beat_periodictasks (ident, last_update) VALUES (1, %s)", [now]
                )
    finally:
        connection.close()
    return changed


@dataclass
class Outcome:
    task: BeatTask
    verb: str  # created | updated | unchanged | skipped
    line: str
    job: Job | None = None


def import_tasks(
    *, tasks: list[BeatTask], tenant: Tenant, bridge: str, now: datetime, dry_run: bool, actor: Actor
) -> list[Outcome]:
    """Each task's job created, updated or left as it is (nothing written with `dry_run`), each
    change audited as `actor`'s."""
    outcomes = []
    for task in tasks:
        plan = plan_of(task, bridge=bridge, now=now)
        if plan.fields is None:
            outcomes.append(Outcome(task, "skipped", f"skipped    {task.name}: {plan.skip}"))
            continue
        notes = "".join(f"\n             ({note})" for note in plan.notes)
        existing = Job.objects.filter(tenant=tenant, name=plan.name, created_by=ACTOR).order_by("created_at").first()
        if existing is None:
            job = None
            if not dry_run:
                job = audited(
                    actor=actor,
                    action="job.create",
                    target=Target(type="job", label=plan.name, tenant_id=tenant.pk),
                    now=now,
                    run=functools.partial(_create, fields=plan.fields, paused=plan.paused, tenant=tenant, now=now),
                    describe=_saying(f"import_beat: {describe(plan.fields)}"),
                    target_of=Target.of_job,
                )
            state = " (PAUSED: disabled in beat)" if plan.paused else ""
            first = first_fire_of(plan.fields, now).isoformat()
            line = f"created    {task.name}: {describe(plan.fields)}{state}, first fire {first}{notes}"
            outcomes.append(Outcome(task, "created", line, job))
            continue
        wanted = dict(plan.fields)
        if plan.floating_start and existing.type == JobType.INTERVAL:
            wanted.pop("start_at")
        changed = {key: value for key, value in wanted.items() if getattr(existing, key) != value}
        if not changed:
            outcomes.append(Outcome(task, "unchanged", f"unchanged  {task.name}{notes}", existing))
        elif existing.standing in JOB_ENDED:
            line = f"unchanged  {task.name}: its job {existing.pk} is {existing.standing}, and is not changed"
            outcomes.append(Outcome(task, "unchanged", line, existing))
        else:
            job = existing
            if not dry_run:
                job = audited(
                    actor=actor,
                    action="job.update",
                    target=Target.of_job(existing),
                    now=now,
                    run=functools.partial(job_update, job=existing, fields=changed, now=now, actor=ACTOR),
                    describe=_saying("import_beat: changed " + ", ".join(sorted(changed))),
                )
            line = f"updated    {task.name}: {', '.join(sorted(changed))} → {describe(plan.fields)}{notes}"
            outcomes.append(Outcome(task, "updated", line, job))
    return outcomes


def _create(*, fields: dict[str, Any], paused: bool, tenant: Tenant, now: datetime) -> Job:
    """A task's job, PAUSED if beat had it disabled (in the caller's transaction, with its row)."""
    job = job_create(tenant=tenant, fields=fields, now=now, actor=ACTOR).job
    return job_pause(job=job, now=now) if paused else job


def _saying(detail: str) -> Callable[[Any], str]:
    """An audit row's detail, whatever the action returned."""
    return lambda _: detail
