"""/metrics after a scripted workload through real processes (daphne, a dispatcher, a sweeper,
Celery prefork workers): every metric has the value the workload makes, and replacing the
worker process changes no counter, since every number is read from the store."""

import signal
import socket
import sys
import time

import pytest
import requests
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from executions.models import Execution
from pools.models import Worker
from scheduling.execution_changes import execution_cancel
from scheduling.job_changes import job_cancel
from testing.harness import execution_in, wait_for
from web.tests.test_metrics import FAMILIES, TOKEN, samples

pytestmark = pytest.mark.e2e

DEFAULT = (("pool", "default"),)
BATCH = (("pool", "batch"),)  # served by no worker: its due work waits


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _web(live, env):
    port = _free_port()
    live.start(
        "web",
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "scheduler_project.asgi:application"],
        env=env,
    )

    def listening() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_for(listening, timeout=60, interval=0.1, what="daphne to listen")
    return f"http://127.0.0.1:{port}/metrics"


def _scrape(url: str) -> dict:
    response = requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert response.status_code == 200, response.text
    return {f.name: f for f in text_string_to_metric_families(response.text)}


def _all_done(ids) -> bool:
    return Execution.objects.filter(pk__in=ids, state__in=["SUCCEEDED", "DEAD", "CANCELLED"]).count() == len(ids)


def test_every_metric_is_true_after_a_workload_and_a_replaced_worker(live, settings, tenant, other_tenant, make_job):
    settings.TICKWORK_POOLS = ["default", "batch"]
    env = {"TICKWORK_POOLS": "default,batch"}
    worker = live.worker(concurrency=2, env=env, wait=False)
    live.dispatcher(env=env)
    live.sweeper(env=env)
    live.ready()
    url = _web(live, {**env, "TICKWORK_METRICS_TOKEN": TOKEN, "TICKWORK_METRICS_CACHE_SECONDS": "0"})
    assert requests.get(url, timeout=30).status_code == 401

    now = timezone.now()
    quick = {"max_attempts": 3, "initial_delay_ms": 100, "jitter": False, "run_at": now, "now": now}
    ids = [make_job(tenant, **quick).executions.get().pk for _ in range(2)]  # 2 SUCCEEDED
    ids.append(make_job(tenant, handler="fail", payload={"failTimes": 1}, **quick).executions.get().pk)  # 1 retry
    dead_args = {**quick, "max_attempts": 2}
    ids.append(make_job(tenant, handler="fail", payload={}, **dead_args).executions.get().pk)  # 1 retry, DEAD
    stopped = make_job(other_tenant, handler="sleep", payload={"seconds": 60}, **quick).executions.get()
    ids.append(stopped.pk)
    later = make_job(other_tenant, run_at=now + timezone.timedelta(hours=1), now=now)
    ids.append(later.executions.get().pk)
    job_cancel(job=later, now=timezone.now())  # CANCELLED before it ran
    wait_for(lambda: execution_in(stopped.pk, "RUNNING"), timeout=30, what="the sleep to start")
    execution_cancel(execution=stopped, now=timezone.now())  # CANCELLED while it ran
    wait_for(lambda: _all_done(ids), timeout=60, what="the first batch to end")
    before = _scrape(url)

    # The worker is replaced: killed outright, and another started. No count lives in it.
    worker.signal(signal.SIGKILL)
    wait_for(lambda: not worker.members(), timeout=10, what="the worker to die")
    live.worker(name="replacement", concurrency=3, env=env)
    after_kill = _scrape(url)
    for name in ("tickwork_executions_finished_total", "tickwork_execution_retries_total"):
        assert samples(after_kill, name) == samples(before, name)

    now = timezone.now()
    ids += [make_job(tenant, run_at=now, now=now).executions.get().pk for _ in range(2)]  # 2 more SUCCEEDED
    wait_for(lambda: _all_done(ids), timeout=60, what="the second batch to end")
    running = make_job(tenant, handler="sleep", payload={"seconds": 120}, run_at=now, now=now).executions.get()
    due = make_job(tenant, pool="batch", run_at=now, now=now).executions.get()
    wait_for(lambda: execution_in(running.pk, "RUNNING"), timeout=30, what="the long sleep to start")
    wait_for(
        lambda: _live_workers() == [1],
        timeout=30,
        what="the killed worker to be offline and the replacement to report its busy slot",
    )
    time.sleep(0.5)  # past the due job's time by a visible margin

    m = _scrape(url)

    assert {name: m[name].type for name in FAMILIES} == FAMILIES
    assert samples(m, "tickwork_executions_finished_total") == {
        (("outcome", "SUCCEEDED"), *DEFAULT, ("tenant", "acme")): 5,
        (("outcome", "DEAD"), *DEFAULT, ("tenant", "acme")): 1,
        (("outcome", "CANCELLED"), *DEFAULT, ("tenant", "globex")): 2,
    }
    assert samples(m, "tickwork_execution_retries_total") == {DEFAULT: 2, BATCH: 0}
    # Observed: the 7 finished executions that started (not the one cancelled before it ran).
    for histogram in ("tickwork_execution_start_lag_seconds", "tickwork_execution_run_duration_seconds"):
        assert samples(m, f"{histogram}_count") == {DEFAULT: 7, BATCH: 0}
        buckets = samples(m, f"{histogram}_bucket")
        assert buckets[(("le", "+Inf"), *DEFAULT)] == 7
        assert samples(m, f"{histogram}_sum")[DEFAULT] > 0
    lag = samples(m, "tickwork_execution_start_lag_seconds_bucket")
    assert lag[(("le", "60.0"), *DEFAULT)] == 7  # every start within a minute of its time
    duration = samples(m, "tickwork_execution_run_duration_seconds_bucket")
    assert duration[(("le", "0.01"), *DEFAULT)] < 7  # the cancelled sleep ran a while
    assert samples(m, "tickwork_dead_letter_executions") == {DEFAULT: 1, BATCH: 0}
    assert samples(m, "tickwork_pool_due_backlog") == {DEFAULT: 0, BATCH: 1}
    oldest = samples(m, "tickwork_pool_oldest_due_age_seconds")
    assert oldest[DEFAULT] == 0 and 0.4 < oldest[BATCH] < (timezone.now() - due.available_at).total_seconds() + 1
    assert samples(m, "tickwork_pool_admitted") == {
        (*DEFAULT, ("state", "QUEUED")): 0,
        (*DEFAULT, ("state", "RUNNING")): 1,
        (*BATCH, ("state", "QUEUED")): 0,
        (*BATCH, ("state", "RUNNING")): 0,
    }
    assert samples(m, "tickwork_pool_worker_slots") == {DEFAULT: 3, BATCH: 0}
    assert samples(m, "tickwork_pool_busy_slots") == {DEFAULT: 1, BATCH: 0}
    assert samples(m, "tickwork_pool_workers") == {DEFAULT: 1, BATCH: 0}
    assert samples(m, "tickwork_workers_live") == {(): 1}
    seen = samples(m, "tickwork_role_last_seen_timestamp_seconds")
    assert set(seen) == {(("role", "dispatcher"),), (("role", "sweeper"),)}
    assert all(abs(at - time.time()) < 30 for at in seen.values())
    assert all(age < 30 for age in samples(m, "tickwork_role_last_seen_age_seconds").values())


def _live_workers() -> list[int]:
    """The busy slots of each live worker, as the registry has them."""
    from pools import registry

    return list(Worker.objects.filter(registry.live(timezone.now())).values_list("busy", flat=True))
