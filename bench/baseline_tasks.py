"""Bare Celery tasks: the baseline the benchmark holds Tickwork against.

Loaded into the benchmark's workers with `--include bench.baseline_tasks`, so the baseline runs
in the same app, with the same worker settings, as `tickwork.run_execution`; only the task
body differs. `noop` does nothing at all. `mark` and `lag` write one Redis entry, which is how
the benchmark learns when the last message ran and how late each one started.
"""

import time

import redis
from celery import shared_task
from django.conf import settings

_client = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    return _client


@shared_task(name="tickwork_bench.noop", ignore_result=True)
def noop(*args) -> None:
    return None


@shared_task(name="tickwork_bench.mark", ignore_result=True)
def mark(key: str) -> None:
    """Records when it ran (the end of a throughput round)."""
    _redis().rpush(key, repr(time.time()))


@shared_task(name="tickwork_bench.lag", ignore_result=True)
def lag(key: str, sent_at: float) -> None:
    """Records how long after `sent_at` it started."""
    _redis().rpush(key, repr(time.time() - sent_at))
