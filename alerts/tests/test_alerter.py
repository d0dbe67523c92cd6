"""Each kind of rule against the store, through the alerter's unit of work (evaluate, then deliver):
a breach fires one alert, notified once by a signed webhook (to a real local HTTP server) and one
email (Django's locmem backend); evaluating again notifies nothing more; once the breach is gone
the alert resolves, notified once each way again. Time is injected (run_once's `now`)."""

import time
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from alerts.models import Alert, AlertRule, Notification
from executions.models import Execution
from jobs.models import Job
from pools import registry
from pools.models import Role, Worker
from scheduling.job_changes import job_pause, job_resume
from tenants import signing
from testing.steps import alerter_pass


def _rule(tenant, receiver, **fields) -> AlertRule:
    fields.setdefault("window_sec", 300)
    return AlertRule.objects.create(
        tenant=tenant,
        name=f"{fields['kind'].lower()} rule",
        channels=[{"type": "webhook", "url": receiver.url}, {"type": "email", "to": "oncall@example.com"}],
        **fields,
    )


def _role(kind: str, *, seen_at) -> Role:
    return Role.objects.create(kind=kind, hostname="host", pid=1, started_at=seen_at, last_seen_at=seen_at)


def _one_off(make_job, tenant, *, run_at):
    job = make_job(tenant, run_at=run_at, now=run_at - timedelta(seconds=1))
    return Execution.objects.get(job=job)


def _breach_failure_rate(tenant, make_job, drive, now):
    for i in range(10):
        drive(_one_off(make_job, tenant, run_at=now), "DEAD" if i < 3 else "SUCCEEDED")


def _breach_start_lag(tenant, make_job, drive, now):
    drive(_one_off(make_job, tenant, run_at=now - timedelta(seconds=10)), "SUCCEEDED")


def _breach_dead_letter(tenant, make_job, drive, now):
    drive(_one_off(make_job, tenant, run_at=now), "DEAD")


def _breach_missed_fire(tenant, make_job, drive, now):
    make_job(tenant, type="CRON", schedule="* * * * *", now=now - timedelta(minutes=10))


def _heal_missed_fire(tenant, drive, now):
    for execution in Execution.objects.filter(tenant=tenant, state="PENDING"):
        drive(execution, "RUNNING")
    return now


def _breach_job_auto_paused(tenant, make_job, drive, now):
    # A job paused by someone does not page; the one the system paused after its failed fire does.
    job_pause(job=make_job(tenant, type="INTERVAL", every_sec=60, now=now, pause_after_failures=1), now=now)
    job = make_job(tenant, type="INTERVAL", every_sec=60, start_at=now, now=now, pause_after_failures=1)
    drive(Execution.objects.get(job=job), "DEAD")


def _heal_job_auto_paused(tenant, drive, now):
    for job in Job.objects.filter(tenant=tenant).exclude(paused_reason=""):
        job_resume(job=job, now=now)
    return now


def _later(tenant, drive, now):
    """The window has passed: what breached it is history."""
    return now + timedelta(seconds=301)


def _healthy_fleet(now):
    _role("sweeper", seen_at=now)
    _role("dispatcher", seen_at=now)
    registry.register(hostname="host", pid=2, pools=["default"], slots=4, now=now)


def _breach_scheduler_down(tenant, make_job, drive, now):
    # The dispatcher was last seen a minute ago; the sweeper is fine: one subject, one alert.
    Role.objects.filter(kind="dispatcher").update(last_seen_at=now - timedelta(seconds=60))


def _heal_scheduler_down(tenant, drive, now):
    Role.objects.filter(kind="dispatcher").update(last_seen_at=now)
    return now


def _breach_no_workers(tenant, make_job, drive, now):
    Worker.objects.update(stopped_at=now)  # a clean stop: offline at once


def _heal_no_workers(tenant, drive, now):
    registry.register(hostname="host", pid=3, pools=["default"], slots=4, now=now)
    return now


KINDS = {
    "FAILURE_RATE": ({"threshold": 20}, _breach_failure_rate, _later, "all", "failure rate 30% (3 of 10 runs"),
    "START_LAG_P99": ({"threshold": 1000}, _breach_start_lag, _later, "all", "start lag p99"),
    "DEAD_LETTER": ({"threshold": 0, "pool": "default"}, _breach_dead_letter, _later, "pool:default", "1 execution"),
    "NO_WORKERS": ({"pool": "default"}, _breach_no_workers, _heal_no_workers, "pool:default", "pool default has no"),
    "SCHEDULER_DOWN": ({"threshold": 30}, _breach_scheduler_down, _heal_scheduler_down, "dispatcher", "no dispatcher"),
    "MISSED_FIRE": ({"threshold": 60}, _breach_missed_fire, _heal_missed_fire, "job:", "missed its"),
    "JOB_AUTO_PAUSED": ({}, _breach_job_auto_paused, _heal_job_auto_paused, "job:", "paused after 1 consecutive"),
}


def _verified(receiver, tenant, index):
    request = receiver.requests[index]
    header = request.headers.get(signing.SIGNATURE_HEADER)
    assert signing.verify(header, request.body, secrets=[tenant.signing_secret], now=time.time()), header
    return request.json()


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_fires_once_and_resolves_once_with_one_webhook_and_one_email_each_way(
    kind, tenant, make_job, drive, receiver
):
    fields, breach, heal, subject, words = KINDS[kind]
    now = timezone.now()
    rule = _rule(tenant, receiver, kind=kind, **fields)

    _healthy_fleet(now)
    assert alerter_pass(now)["alert_evaluation"].fired == 0, "nothing breaches yet"
    breach(tenant, make_job, drive, now)
    result = alerter_pass(timezone.now())

    alert = Alert.objects.get(rule=rule)
    assert alert.state == "FIRING" and alert.subject.startswith(subject), alert.subject
    assert words in alert.summary, alert.summary
    assert result["alert_delivery"].sent == 2
    assert len(receiver.requests) == 1 and len(mail.outbox) == 1
    body = _verified(receiver, tenant, 0)
    assert body["state"] == "FIRING" and body["alertId"] == str(alert.pk) and body["ruleId"] == str(rule.pk)
    assert body["kind"] == kind and body["tenant"] == "acme" and body["summary"] == alert.summary
    assert receiver.requests[0].headers["Idempotency-Key"] == f"{alert.pk}:FIRED"
    assert mail.outbox[0].to == ["oncall@example.com"] and "FIRING" in mail.outbox[0].subject
    assert alert.summary in mail.outbox[0].body

    again = alerter_pass(timezone.now())
    assert again["alert_evaluation"].fired == 0 and again["alert_delivery"].total() == 0
    assert len(receiver.requests) == 1 and len(mail.outbox) == 1

    later = heal(tenant, drive, timezone.now())
    result = alerter_pass(later)

    alert.refresh_from_db()
    assert alert.state == "RESOLVED" and alert.resolved_at == later
    assert result["alert_evaluation"].resolved == 1 and result["alert_delivery"].sent == 2
    assert len(receiver.requests) == 2 and len(mail.outbox) == 2
    body = _verified(receiver, tenant, 1)
    assert body["state"] == "RESOLVED" and body["alertId"] == str(alert.pk) and body["resolvedAt"]
    assert "RESOLVED" in mail.outbox[1].subject
    assert Notification.objects.filter(alert=alert, state="SENT").count() == 4

    final = alerter_pass(later)
    assert (
        final["alert_evaluation"].fired == 0
        and final["alert_evaluation"].resolved == 0
        and final["alert_delivery"].total() == 0
    )
    assert Alert.objects.filter(rule=rule).count() == 1


def test_a_breach_fires_once_and_resolves_once_however_many_evaluators_see_it(tenant, receiver):
    """The second of two evaluators that both saw a new breach makes no alert and no notification
    (the unique FIRING row), and the second resolve changes nothing."""
    from alerts.evaluation import Breach
    from alerts.services import alert_fire, alert_resolve

    rule = _rule(tenant, receiver, kind="NO_WORKERS", pool="default")
    now = timezone.now()
    breach = Breach("pool:default", "pool default has no live worker")

    assert alert_fire(rule=rule, breach=breach, now=now) is True
    assert alert_fire(rule=rule, breach=breach, now=now) is False
    alert = Alert.objects.get()
    assert Notification.objects.filter(alert=alert).count() == 2

    assert alert_resolve(alert=alert, summary="resolved", now=now) is True
    assert alert_resolve(alert=alert, summary="resolved", now=now) is False
    assert Notification.objects.filter(alert=alert).count() == 4
    assert alert_fire(rule=rule, breach=breach, now=now) is True  # a new breach is a new alert
    assert Alert.objects.count() == 2
