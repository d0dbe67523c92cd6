"""Each role's connections to PostgreSQL stay within what the README's production section says:
a dispatcher 2, a sweeper 1, a worker 3 per pool process and 2 for its main process's cancel relay
and registration (the web role: scheduler_project/tests)."""

import threading
from collections import Counter

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from executions.models import Execution
from testing.harness import database_url, wait_for

pytestmark = pytest.mark.e2e
BUDGET = {"dispatcher": 2, "sweeper": 1, "worker": 3 * 2 + 2}  # the worker runs 2 pool processes


def test_each_role_keeps_within_its_connection_budget(live, tenant, make_job):
    """300 runs through a dispatcher, a sweeper and a worker of concurrency 2; sampled all along,
    no role ever holds more connections than its budget."""
    if connection.vendor != "postgresql":
        pytest.skip("connection budgets are PostgreSQL's (pg_stat_activity)")
    url = database_url()
    for role in BUDGET:
        start = getattr(live, role)
        kwargs = {"wait": False} if role == "worker" else {}
        # Straight to PostgreSQL, not through the pooler: the budget is what a role itself opens.
        start(env={"DATABASE_URL": f"{url}?application_name=budget-{role}", "DATABASE_DIRECT_URL": ""}, **kwargs)
    live.ready()
    peak, done = Counter(), threading.Event()

    def watch() -> None:
        with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as watcher:
            while not done.is_set():
                rows = watcher.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity"
                    " WHERE datname = %s AND application_name LIKE 'budget-%%' GROUP BY 1",
                    [connection.settings_dict["NAME"]],
                ).fetchall()
                for name, count in rows:
                    role = name.removeprefix("budget-")
                    peak[role] = max(peak[role], count)
                done.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        now = timezone.now()
        for _ in range(300):
            make_job(tenant, run_at=now, now=now)
        wait_for(lambda: Execution.objects.filter(state="SUCCEEDED").count() == 300, timeout=120, what="300 runs")
    finally:
        done.set()
        watcher.join()
    assert set(peak) == set(BUDGET), peak
    assert all(peak[role] <= BUDGET[role] for role in BUDGET), peak
