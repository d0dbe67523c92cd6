"""What each django-celery-beat task becomes (worker/beat_import.py `plan_of`), without a
database: beat's crontab read as beat reads it (Celery's own parser), intervals anchored where
beat would fire next, and what cannot be carried named. The whole command runs against beat's
real tables in tests_e2e/test_e2e_import_beat.py."""

from datetime import UTC, datetime, timedelta

import pytest

from worker.beat_import import BeatTask, crontab_expression, plan_of

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def task(**fields) -> BeatTask:
    base = {
        "id": 1, "name": "t", "task": "app.tasks.t", "args": "[]", "kwargs": "{}", "queue": None, "exchange": None,
        "routing_key": None, "headers": "{}", "priority": None, "expires": None, "expire_seconds": None,
        "one_off": False, "start_time": None, "enabled": True, "last_run_at": None,
    }  # fmt: skip
    return BeatTask(**{**base, **fields})


def cron(minute="*", hour="*", day_of_month="*", month_of_year="*", day_of_week="*", **fields) -> BeatTask:
    return task(
        minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year, day_of_week=day_of_week,
        timezone=fields.pop("timezone", "UTC"), **fields,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "expression"),
    [
        ({"minute": "*/15", "hour": "9-17", "day_of_week": "mon-fri"}, "*/15 9-17 * * 1-5"),
        ({"minute": "0", "hour": "4", "day_of_week": "sat,sun"}, "0 4 * * 0,6"),
        # A range that wraps: Celery reads it around the end of the week, cron cannot.
        ({"minute": "0", "hour": "4", "day_of_week": "fri-mon"}, "0 4 * * 0-1,5-6"),
        ({"minute": "0", "hour": "22-2"}, "0 0-2,22-23 * * *"),
        # Every value written out is "*": cron's day rule must not see it as a restriction.
        ({"minute": "30", "hour": "2", "day_of_month": "1-31", "day_of_week": "1-5"}, "30 2 * * 1-5"),
        ({"minute": "0", "hour": "0", "day_of_month": "*/2", "month_of_year": "jan,jul"}, "0 0 */2 1,7 *"),
    ],
)
def test_a_crontab_means_what_it_meant_to_beat(fields, expression):
    assert crontab_expression(cron(**fields)) == expression


def test_both_day_fields_restricted_cannot_be_said_in_cron():
    plan = plan_of(cron(minute="0", hour="8", day_of_month="1-7", day_of_week="1"), bridge="b", now=NOW)
    assert plan.fields is None and "both restricted" in plan.skip


def test_a_crontab_becomes_a_cron_job_on_the_bridge():
    plan = plan_of(
        cron(minute="30", hour="2", timezone="Europe/Paris", args='["eu"]', kwargs='{"full": true}', queue="reports"),
        bridge="legacy",
        now=NOW,
    )
    assert plan.fields is not None
    assert {k: plan.fields[k] for k in ("type", "schedule", "timezone", "handler")} == {
        "type": "CRON", "schedule": "30 2 * * *", "timezone": "Europe/Paris", "handler": "celery",
    }  # fmt: skip
    assert plan.fields["payload"] == {
        "bridge": "legacy", "task": "app.tasks.t", "args": ["eu"], "kwargs": {"full": True}, "queue": "reports",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "start"),
    [
        ({"last_run_at": NOW - timedelta(seconds=30)}, NOW + timedelta(seconds=60)),  # a period after its last run
        ({"start_time": NOW + timedelta(days=1)}, NOW + timedelta(days=1)),  # at its start time
        ({}, NOW + timedelta(seconds=90)),  # a new task: a period from now, as beat counts it
    ],
)
def test_an_interval_is_anchored_where_beat_would_fire_next(fields, start):
    plan = plan_of(task(every=90, period="seconds", **fields), bridge="b", now=NOW)
    assert plan.fields is not None
    assert (plan.fields["type"], plan.fields["every_sec"], plan.fields["start_at"]) == ("INTERVAL", 90, start)
    assert plan.floating_start == (not fields)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"every": 500, "period": "microseconds"}, "whole seconds"),
        ({"solar_event": "sunset"}, "solar schedule (sunset)"),
        ({"clocked_time": NOW, "last_run_at": NOW}, "clocked task already ran"),
        ({"every": 1, "period": "hours", "one_off": True, "last_run_at": NOW}, "one-off task already ran"),
        ({"every": 1, "period": "hours", "args": "not json"}, "its args are not JSON"),
        ({"every": 1, "period": "hours", "kwargs": "[1]"}, "its kwargs are not a JSON object"),
        ({}, "no schedule"),
    ],
)
def test_what_cannot_be_imported_is_skipped_with_the_reason(fields, reason):
    plan = plan_of(task(**fields), bridge="b", now=NOW)
    assert plan.fields is None and reason in plan.skip


def test_fields_tickwork_cannot_express_are_named():
    plan = plan_of(
        task(every=1, period="hours", expires=NOW, priority=5, exchange="x", routing_key="r", headers='{"a": 1}'),
        bridge="b",
        now=NOW,
    )
    assert [note.split(" not carried")[0] for note in plan.notes] == [
        "expires", "priority 5", "exchange 'x'", "routing_key 'r'", "headers",
    ]  # fmt: skip


def test_one_off_and_disabled_tasks():
    one_off = plan_of(cron(minute="0", hour="13", one_off=True), bridge="b", now=NOW)
    assert one_off.fields is not None
    assert (one_off.fields["type"], one_off.fields["run_at"]) == ("ONCE", datetime(2026, 11, 28, 13, tzinfo=UTC))
    disabled = plan_of(task(every=1, period="hours", enabled=False), bridge="b", now=NOW)
    assert disabled.paused


@pytest.mark.django_db
def test_a_missing_sqlite_file_is_refused_as_missing_and_not_created(tenant, settings, tmp_path):
    """SQLite creates a file it is pointed at; a mistyped --from names the path instead of
    reporting "no such table" from an empty file left behind."""
    from django.core.management import CommandError, call_command

    settings.TICKWORK_CELERY_BRIDGES = {"legacy": {"broker": "memory://"}}
    missing = tmp_path / "beat.sqlite3"
    with pytest.raises(CommandError, match=f"no SQLite file at {missing}"):
        call_command("import_beat", "--from", f"sqlite:///{missing}", "--tenant", tenant.slug, "--bridge", "legacy")
    assert not missing.exists()
