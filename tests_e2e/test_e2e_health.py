"""Health tells the truth with real processes: 200 while a dispatcher, a sweeper and a worker run;
503 naming the dispatcher once it has been gone for its bound; 200 again when one is back."""

import signal

import pytest
from rest_framework.test import APIClient

from testing.harness import wait_for

pytestmark = pytest.mark.e2e


def test_health_answers_503_once_no_dispatcher_has_been_seen_for_its_bound(live, settings):
    settings.TICKWORK_HEALTH_DISPATCHER_SECONDS = 2
    client = APIClient()
    live.worker(wait=False)
    dispatcher = live.dispatcher()
    live.sweeper()
    live.ready()

    up = wait_for(lambda: (r := client.get("/v1/health")).status_code == 200 and r, timeout=20, what="health 200")
    assert up.json()["status"] == "ok", up.json()

    dispatcher.signal(signal.SIGKILL)
    down = wait_for(lambda: (r := client.get("/v1/health")).status_code == 503 and r, timeout=20, what="health 503")

    assert down.json()["dispatcher"].startswith("no dispatcher has finished a unit of work for")
    assert down.json()["sweeper"] == "ok" and down.json()["workers"] == "ok"

    live.dispatcher()
    wait_for(lambda: client.get("/v1/health").status_code == 200, timeout=20, what="health 200 again")
