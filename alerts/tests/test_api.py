"""The alert rules and alerts API: create, read, change, delete; every bad field a 400 naming it;
another tenant's rules, alerts and jobs are not found; lists page as the other lists do."""

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from alerts.models import Alert, AlertRule

HOOK = {"type": "webhook", "url": "https://hooks.example.com/tickwork"}
MAIL = {"type": "email", "to": "oncall@example.com"}


def _body(**fields):
    body = {"name": "too many failures", "kind": "FAILURE_RATE", "threshold": 20, "channels": [HOOK, MAIL]}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not ...}


def test_a_rule_is_created_with_the_contracts_fields_read_changed_and_deleted(api):
    created = api.post("/v1/alerts/rules", _body(windowSec=600, pool="default"), format="json")

    assert created.status_code == 201, created.json()
    rule = created.json()
    assert rule["name"] == "too many failures" and rule["kind"] == "FAILURE_RATE"
    assert rule["threshold"] == 20 and rule["windowSec"] == 600 and rule["pool"] == "default"
    assert rule["jobId"] is None and rule["channels"] == [HOOK, MAIL] and rule["enabled"] is True
    assert rule["tenant"] == "acme" and rule["createdAt"]
    url = f"/v1/alerts/rules/{rule['ruleId']}"
    assert api.get(url).json() == rule
    assert api.get("/v1/alerts/rules").json()["results"] == [rule]

    changed = api.patch(url, {"threshold": 35.5, "enabled": False}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["threshold"] == 35.5 and changed.json()["enabled"] is False
    assert changed.json()["windowSec"] == 600

    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404
    assert not AlertRule.objects.exists()


@pytest.mark.parametrize(
    ("kind", "threshold", "stored"),
    [("DEAD_LETTER", ..., 0.0), ("SCHEDULER_DOWN", ..., 60.0), ("MISSED_FIRE", ..., 60.0), ("NO_WORKERS", 5, None)],
)
def test_a_kind_with_a_default_threshold_takes_it_and_no_workers_has_none(api, kind, threshold, stored):
    response = api.post("/v1/alerts/rules", _body(kind=kind, threshold=threshold), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["threshold"] == stored


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"kind": "CPU_HOT"}, "kind", "not a valid choice"),
        ({"threshold": ...}, "threshold", "required for FAILURE_RATE"),
        ({"threshold": 100}, "threshold", "percentage"),
        ({"threshold": -1}, "threshold", "percentage"),
        ({"kind": "START_LAG_P99", "threshold": 0}, "threshold", "milliseconds"),
        ({"kind": "SCHEDULER_DOWN", "threshold": 100000}, "threshold", "seconds"),
        ({"windowSec": 5}, "windowSec", "10"),
        ({"windowSec": 10**9}, "windowSec", ""),
        ({"pool": "nope"}, "pool", "unknown pool"),
        ({"kind": "SCHEDULER_DOWN", "threshold": 30, "pool": "default"}, "pool", "not a pool"),
        ({"kind": "NO_WORKERS", "jobId": "5f0c6b7e-8f1a-4c59-9a39-1f3e2a9a0b11"}, "jobId", "not a job"),
        ({"jobId": "5f0c6b7e-8f1a-4c59-9a39-1f3e2a9a0b11"}, "jobId", "no such job"),
        ({"name": ""}, "name", "blank"),
        ({"name": "x" * 201}, "name", "200"),
        ({"channels": []}, "channels", "1 to 10"),
        ({"channels": [HOOK] * 2}, "channels", "twice"),
        ({"channels": [{"type": "webhook", "url": f"https://h.example.com/{i}"} for i in range(11)]}, "channels", "10"),
        ({"channels": [{"type": "webhook", "url": "ftp://example.com/x"}]}, "channels", "scheme"),
        ({"channels": [{"type": "webhook"}]}, "channels", "required"),
        ({"channels": [{"type": "email", "to": "not an address"}]}, "channels", "email address"),
        ({"channels": [{"type": "sms", "to": "+15550100"}]}, "channels", "webhook"),
        ({"channels": [{"type": "email", "to": "a@example.com", "cc": "b@example.com"}]}, "channels", "unknown"),
        ({"channels": "https://example.com"}, "channels", "list"),
        ({"channels": [{"type": "email", "to": "a\x00@example.com"}]}, "channels", "NUL"),
        ({"severity": "high"}, "severity", "unknown field"),
    ],
)
def test_a_bad_rule_is_a_400_naming_the_field_and_nothing_is_made(api, fields, field, words):
    response = api.post("/v1/alerts/rules", _body(**fields), format="json")

    assert response.status_code == 400, response.json()
    assert field in response.json(), response.json()
    assert words in str(response.json()[field]), response.json()
    assert not AlertRule.objects.exists()


def test_another_tenants_rules_alerts_and_jobs_are_not_found(api, other_api, other_tenant, make_job):
    theirs = other_api.post("/v1/alerts/rules", _body(), format="json").json()
    rule = AlertRule.objects.get(pk=theirs["ruleId"])
    alert = Alert.objects.create(rule=rule, tenant=other_tenant, subject="all", fired_at=timezone.now(), summary="x")
    their_job = make_job(other_tenant, type="CRON")

    url = f"/v1/alerts/rules/{theirs['ruleId']}"
    assert api.get(url).status_code == 404
    assert api.patch(url, {"name": "mine"}, format="json").status_code == 404
    assert api.delete(url).status_code == 404
    assert api.get(f"/v1/alerts/{alert.pk}").status_code == 404
    assert api.get("/v1/alerts/rules").json()["results"] == []
    assert api.get("/v1/alerts").json()["results"] == []
    mine = api.post("/v1/alerts/rules", _body(kind="MISSED_FIRE", jobId=str(their_job.pk)), format="json")
    assert mine.status_code == 400 and "no such job" in str(mine.json()["jobId"])
    assert other_api.get(url).status_code == 200 and other_api.get(f"/v1/alerts/{alert.pk}").status_code == 200


def test_missed_fire_for_a_job_must_name_a_recurring_job_of_the_tenant(api, tenant, make_job):
    once = make_job(tenant)
    cron = make_job(tenant, type="CRON")
    interval = make_job(tenant, type="INTERVAL", every_sec=90)

    refused = api.post("/v1/alerts/rules", _body(kind="MISSED_FIRE", jobId=str(once.pk)), format="json")
    made = api.post("/v1/alerts/rules", _body(kind="MISSED_FIRE", threshold=30, jobId=str(cron.pk)), format="json")
    also = api.post("/v1/alerts/rules", _body(kind="MISSED_FIRE", jobId=str(interval.pk)), format="json")

    assert refused.json()["jobId"] == ["MISSED_FIRE watches CRON and INTERVAL jobs; this job is ONCE"]
    assert made.status_code == 201 and made.json()["jobId"] == str(cron.pk)
    assert also.status_code == 201


def test_a_change_is_checked_against_the_stored_rule(api):
    rule = api.post("/v1/alerts/rules", _body(), format="json").json()
    url = f"/v1/alerts/rules/{rule['ruleId']}"

    assert api.patch(url, {"kind": "START_LAG_P99"}, format="json").status_code == 400  # its threshold is not ms
    assert api.patch(url, {"tenant": "globex"}, format="json").status_code == 400
    changed = api.patch(url, {"kind": "START_LAG_P99", "threshold": 2000}, format="json")
    assert changed.status_code == 200 and changed.json()["kind"] == "START_LAG_P99"


def test_a_token_cannot_make_a_rule_in_another_tenant(api, other_tenant):
    response = api.post("/v1/alerts/rules", _body(tenant="globex"), format="json")
    assert response.status_code == 400 and "tenant" in response.json()


def test_staff_make_global_rules_and_see_every_tenants_alerts(api, tenant, db):
    staff = get_user_model().objects.create_user("olivia", password="x", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)

    made = client.post("/v1/alerts/rules", _body(kind="SCHEDULER_DOWN", threshold=30), format="json")
    tenant_rule = client.post("/v1/alerts/rules", _body(tenant="acme"), format="json")

    assert made.status_code == 201 and made.json()["tenant"] is None
    assert tenant_rule.status_code == 201 and tenant_rule.json()["tenant"] == "acme"
    assert len(client.get("/v1/alerts/rules").json()["results"]) == 2
    assert [r["tenant"] for r in api.get("/v1/alerts/rules").json()["results"]] == ["acme"]  # not the global one


def test_alerts_list_newest_first_filtered_and_paged(api, tenant):
    rule = AlertRule.objects.create(tenant=tenant, name="r", kind="DEAD_LETTER", threshold=0, channels=[MAIL])
    now = timezone.now()
    for i in range(3):
        Alert.objects.create(
            rule=rule,
            tenant=tenant,
            subject=f"pool:p{i}",
            fired_at=now - timezone.timedelta(minutes=i),
            summary=f"alert {i}",
            state="FIRING" if i == 0 else "RESOLVED",
            resolved_at=None if i == 0 else now,
        )

    first = api.get("/v1/alerts?pageSize=2").json()
    second = api.get(first["next"]).json()
    firing = api.get("/v1/alerts?state=FIRING").json()["results"]

    assert [a["summary"] for a in first["results"] + second["results"]] == ["alert 0", "alert 1", "alert 2"]
    assert second["next"] is None
    one = first["results"][0]
    assert set(one) >= {"alertId", "ruleId", "state", "firedAt", "resolvedAt", "summary"}
    assert one["state"] == "FIRING" and one["resolvedAt"] is None and one["ruleId"] == str(rule.pk)
    assert [a["summary"] for a in firing] == ["alert 0"]
    assert api.get("/v1/alerts?state=ON").status_code == 400
    assert api.get("/v1/alerts?ruleId=nope").status_code == 400
    assert api.get(f"/v1/alerts?ruleId={rule.pk}").json()["results"][0]["ruleId"] == str(rule.pk)
    assert api.get("/v1/alerts/rules?pageSize=0").status_code == 400
