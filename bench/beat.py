#!/usr/bin/env python
"""The baseline of the cron stage: django-celery-beat's DatabaseScheduler, as its users run it,
sending one minute's tasks among `--schedules` crontab tasks (`m * * * *`, spread over the hour,
as the cron stage's jobs are). Prints one line of JSON: {"ms", "load_ms", "sent", "due"}.

`ms` is from the scheduler's start (it reads every enabled task, as it does again whenever any
task changes: after every minute's runs) until the minute's due tasks are on the broker; `load_ms`
is the first read alone. Runs in a process of its own, with bench/beat_settings.py and a database
of its own (TICKWORK_BENCH_BEAT_DB), created and dropped here."""

import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.beat_settings"

QUEUE = "tickwork_bench.beat"


def main(schedules: int) -> None:
    import psycopg

    from bench.config import database_urls

    name = os.environ["TICKWORK_BENCH_BEAT_DB"]
    admin_url, _ = database_urls(os.environ["DATABASE_URL"], name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        result = measure(schedules)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(json.dumps(result))


def measure(schedules: int) -> dict:
    import django

    django.setup()
    import logging

    logging.getLogger("celery.beat").setLevel(logging.WARNING)
    import redis
    from django.core.management import call_command
    from django_celery_beat.models import CrontabSchedule, PeriodicTask, PeriodicTasks
    from django_celery_beat.schedulers import DatabaseScheduler

    from scheduler_project.celery import app

    call_command("migrate", "django_celery_beat", verbosity=0)
    now = datetime.now(UTC)
    minute = now.replace(second=0, microsecond=0)
    if now - minute > timedelta(seconds=45):  # the whole measurement inside one minute
        time.sleep(61 - (now - minute).total_seconds())
        now = datetime.now(UTC)
        minute = now.replace(second=0, microsecond=0)
    every_hour = {"hour": "*", "day_of_week": "*", "day_of_month": "*", "month_of_year": "*"}
    crontabs = CrontabSchedule.objects.bulk_create([CrontabSchedule(minute=str(m), **every_hour) for m in range(60)])
    # Last run just before this minute began: the tasks of this minute are due, the others not.
    last_run = minute - timedelta(seconds=1)
    PeriodicTask.objects.bulk_create(
        [
            PeriodicTask(
                name=f"bench {i}",
                task="tickwork_bench.noop",
                crontab=crontabs[(minute.minute + i) % 60],
                last_run_at=last_run,
                queue=QUEUE,
            )
            for i in range(schedules)
        ],
        batch_size=5000,
    )
    PeriodicTasks.update_changed()
    due = len(range(0, schedules, 60))
    broker = redis.Redis.from_url(app.conf.broker_url)
    broker.delete(QUEUE)

    started = time.perf_counter()
    scheduler = DatabaseScheduler(app=app)
    loaded = time.perf_counter()
    while broker.llen(QUEUE) < due:
        if scheduler.tick() > 0 and broker.llen(QUEUE) < due and time.perf_counter() - started > 120:
            raise RuntimeError(f"django-celery-beat sent {broker.llen(QUEUE)} of {due} in 120 s")
    elapsed = time.perf_counter() - started
    scheduler.sync()  # as beat does every few minutes: the runs' last_run_at written back
    sent = broker.llen(QUEUE)
    broker.delete(QUEUE)
    return {"ms": elapsed * 1000, "load_ms": (loaded - started) * 1000, "sent": sent, "due": due}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", type=int, default=10_000)
    main(parser.parse_args().schedules)
