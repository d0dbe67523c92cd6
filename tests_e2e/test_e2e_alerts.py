"""The alerter as a user runs it (`manage.py run_alerter`) beside real roles: the dead man's switch.
A cron job's fire comes while no dispatcher runs; the alerter fires MISSED_FIRE, notified once by a
signed webhook (a local receiver) and once by email (the file backend: the alerter is another
process); a dispatcher started again runs the fire, and the alert resolves, notified once each way."""

import signal
import sys
import time
from datetime import timedelta

import pytest

from alerts.models import Alert
from executions.clock import db_now
from executions.models import Execution
from tenants import signing
from testing.harness import wait_for
from testing.webhooks import start_receiver

pytestmark = pytest.mark.e2e


@pytest.fixture
def receiver():
    found = start_receiver()
    yield found
    found.stop()


def test_the_dead_mans_switch_fires_when_no_dispatcher_runs_past_a_cron_fire_and_resolves_when_one_does(
    live, api, tenant, make_job, receiver, tmp_path
):
    mail_dir = tmp_path / "mail"
    live.worker(wait=False)
    dispatcher = live.dispatcher()
    live.start(
        "alerter",
        [sys.executable, "manage.py", "run_alerter"],
        env={
            "TICKWORK_ALERTS_INTERVAL_SECONDS": "0.5",
            "TICKWORK_HTTP_ALLOW_PRIVATE": "true",
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": str(mail_dir),
        },
    )
    live.ready()
    rule = api.post(
        "/v1/alerts/rules",
        {
            "name": "nightly report did not run",
            "kind": "MISSED_FIRE",
            "threshold": 2,
            "channels": [{"type": "webhook", "url": receiver.url}, {"type": "email", "to": "oncall@example.com"}],
        },
        format="json",
    )
    assert rule.status_code == 201, rule.json()

    dispatcher.signal(signal.SIGTERM)
    wait_for(lambda: not dispatcher.alive(), timeout=20, what="the dispatcher to stop")
    # Made as if 58 s ago, while no dispatcher ran: its first fire is past or at most 2 s ahead,
    # rather than up to a minute's wait for the next one.
    job = make_job(
        tenant, type="CRON", schedule="* * * * *", name="nightly report", now=db_now() - timedelta(seconds=58)
    )
    fire = Execution.objects.get(job=job).scheduled_for

    wait_for(lambda: len(receiver.requests) >= 1, timeout=90, what="the MISSED_FIRE webhook")
    fired = receiver.requests[0]
    assert signing.verify(
        fired.headers.get(signing.SIGNATURE_HEADER), fired.body, secrets=[tenant.signing_secret], now=time.time()
    )
    body = fired.json()
    assert body["kind"] == "MISSED_FIRE" and body["state"] == "FIRING" and body["subject"] == f"job:{job.pk}"
    assert "nightly report" in body["summary"] and "PENDING" in body["summary"]
    assert db_now() >= fire + timedelta(seconds=2)
    alert = Alert.objects.get(pk=body["alertId"])
    assert alert.state == "FIRING" and alert.fired_at >= fire + timedelta(seconds=2)
    wait_for(lambda: mail_dir.exists() and len(list(mail_dir.iterdir())) == 1, timeout=10, what="the email")
    time.sleep(1.5)  # three more evaluations: no second notification
    assert len(receiver.requests) == 1

    live.dispatcher()
    wait_for(lambda: len(receiver.requests) >= 2, timeout=60, what="the RESOLVED webhook")
    resolved = receiver.requests[1].json()
    assert resolved["state"] == "RESOLVED" and resolved["alertId"] == str(alert.pk)
    wait_for(lambda: len(list(mail_dir.iterdir())) == 2, timeout=10, what="the second email")
    assert Execution.objects.filter(job=job, scheduled_for=fire).exclude(state__in=["PENDING", "QUEUED"]).exists()
    time.sleep(1.5)
    assert len(receiver.requests) == 2 and Alert.objects.filter(rule_id=rule.json()["ruleId"]).count() == 1
