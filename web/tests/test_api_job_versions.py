"""GET /v1/jobs/{id}/versions and POST /v1/jobs/{id}/versions/{n}/restore: every change of a
job's definition is kept, with who changed what and when, and any version can be made current."""

from datetime import UTC, datetime

import pytest

from executions.models import Execution, Origin
from jobs import registry
from jobs.models import Job, JobVersion
from tenants.services import token_create

pytestmark = pytest.mark.django_db

CRON = {
    "name": "hourly",
    "type": "CRON",
    "schedule": "0 * * * *",
    "timezone": "UTC",
    "target": {"handler": "noop"},
    "payload": {"v": 1},
}


def create(api, body=CRON) -> str:
    response = api.post("/v1/jobs", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["jobId"]


def versions(api, job_id) -> list[dict]:
    response = api.get(f"/v1/jobs/{job_id}/versions")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def pending(job_id) -> Execution:
    return Execution.objects.get(job_id=job_id, state="PENDING", origin=Origin.SCHEDULE)


def test_creating_a_job_records_version_1_with_its_definition_and_no_changes(api, tenant):
    """Version 1 is the job as created: its definition with the API's names, by the token."""
    job_id = create(api)

    [v1] = versions(api, job_id)

    assert v1["version"] == 1
    assert v1["changes"] == []
    assert v1["actor"].startswith("token tw_") and v1["actor"].endswith(" of acme")
    assert datetime.fromisoformat(v1["createdAt"]) <= datetime.now(UTC)
    assert v1["definition"] == {
        "name": "hourly",
        "type": "CRON",
        "schedule": "0 * * * *",
        "timezone": "UTC",
        "target": {"pool": "default", "handler": "noop"},
        "payload": {"v": 1},
        "retryPolicy": {
            "maxAttempts": 3,
            "backoff": "EXPONENTIAL",
            "initialDelayMs": 1000,
            "maxDelayMs": 60000,
            "jitter": True,
        },
        "timeoutSec": 3600,
        "priority": "NORMAL",
        "misfirePolicy": "RUN_ONCE",
        "concurrencyPolicy": "ALLOW",
    }


def test_an_update_records_the_next_version_with_the_changed_fields_and_its_actor(tenant):
    """A PATCH that changes the schedule, payload and part of the retry policy records version 2,
    listed first, whose changes name exactly those fields with their old and new values; the
    actor is the token that made it (by its name)."""
    from rest_framework.test import APIClient

    _, raw = token_create(tenant=tenant, name="deploy-bot")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    job_id = create(api)

    response = api.patch(
        f"/v1/jobs/{job_id}",
        {"schedule": "*/5 * * * *", "payload": {"v": 2}, "retryPolicy": {"maxAttempts": 7}},
        format="json",
    )

    assert response.status_code == 200, response.content
    v2, v1 = versions(api, job_id)
    assert (v2["version"], v1["version"]) == (2, 1)
    assert v2["changes"] == [
        {"field": "schedule", "from": "0 * * * *", "to": "*/5 * * * *"},
        {"field": "payload", "from": {"v": 1}, "to": {"v": 2}},
        {"field": "retryPolicy.maxAttempts", "from": 3, "to": 7},
    ]
    assert v2["actor"] == f"token deploy-bot ({raw[:10]}) of acme"
    assert v2["definition"]["schedule"] == "*/5 * * * *"
    assert v2["definition"]["retryPolicy"]["maxAttempts"] == 7
    assert v1["definition"]["schedule"] == "0 * * * *"


def test_version_1_is_the_jobs_row_until_its_first_change_which_stores_it_unchanged(api, tenant):
    """No copy of a new job's definition is written (jobs.versions): its version 1 is read from its
    row, on a page whose parameters are checked as any page's are, and its first change stores that
    version 1, as it was listed, beside version 2."""
    job_id = create(api)
    [before] = versions(api, job_id)
    job = api.get(f"/v1/jobs/{job_id}").json()

    assert not JobVersion.objects.filter(job_id=job_id).exists()
    assert datetime.fromisoformat(before["createdAt"]) == datetime.fromisoformat(job["createdAt"])
    assert api.get(f"/v1/jobs/{job_id}/versions?pageSize=0").status_code == 400
    assert api.get(f"/v1/jobs/{job_id}/versions?cursor=junk").status_code == 404
    page = api.get(f"/v1/jobs/{job_id}/versions?pageSize=1").json()
    assert page == {"next": None, "previous": None, "results": [before]}

    assert api.patch(f"/v1/jobs/{job_id}", {"name": "renamed"}, format="json").status_code == 200

    v2, v1 = versions(api, job_id)
    assert v1 == before
    assert v2["changes"] == [{"field": "name", "from": "hourly", "to": "renamed"}]
    assert JobVersion.objects.filter(job_id=job_id).count() == 2


@pytest.mark.parametrize(
    "body",
    [
        {"schedule": "0 * * * *"},
        {"payload": {"v": 1}, "target": {"handler": "noop"}},
        {"retryPolicy": {"maxAttempts": 3}},
        {},
    ],
)
def test_an_update_that_changes_nothing_records_no_version(api, tenant, body):
    """A PUT or PATCH naming only the values the job already has answers 200 and records nothing."""
    job_id = create(api)

    assert api.patch(f"/v1/jobs/{job_id}", body, format="json").status_code == 200
    assert api.put(f"/v1/jobs/{job_id}", body, format="json").status_code == 200

    assert [v["version"] for v in versions(api, job_id)] == [1]


def test_an_invalid_update_records_no_version(api, tenant):
    job_id = create(api)

    assert api.patch(f"/v1/jobs/{job_id}", {"schedule": "not cron"}, format="json").status_code == 400

    assert [v["version"] for v in versions(api, job_id)] == [1]
    assert not JobVersion.objects.filter(job_id=job_id).exists()


def test_restore_makes_a_new_version_equal_to_n_and_re_times_the_pending_fire(api, tenant):
    """v1 hourly, v2 every 5 minutes with another payload; restoring 1 makes v3 whose definition
    is v1's, the job's definition is v1's again, and the pending fire is back on the hour."""
    job_id = create(api)
    api.patch(f"/v1/jobs/{job_id}", {"schedule": "*/5 * * * *", "payload": {"v": 2}}, format="json")
    assert pending(job_id).scheduled_for.minute % 5 == 0

    response = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["job"]["schedule"] == "0 * * * *"
    assert body["job"]["payload"] == {"v": 1}
    assert body["version"]["version"] == 3
    v3, _, v1 = versions(api, job_id)
    assert v3 == body["version"]
    assert v3["definition"] == v1["definition"]
    assert v3["changes"] == [
        {"field": "schedule", "from": "*/5 * * * *", "to": "0 * * * *"},
        {"field": "payload", "from": {"v": 2}, "to": {"v": 1}},
    ]
    assert v3["actor"].startswith("token ")
    job = Job.objects.get(pk=job_id)
    assert (job.schedule, job.payload) == ("0 * * * *", {"v": 1})
    execution = pending(job_id)
    assert execution.scheduled_for == execution.available_at == job.next_fire_at
    assert (execution.scheduled_for.minute, execution.scheduled_for.second) == (0, 0)
    assert body["job"]["nextFireAt"] == execution.scheduled_for.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_restore_of_a_once_job_moves_its_pending_run_back(api, tenant):
    first, later = "2031-03-14T09:00:00Z", "2031-06-01T12:30:00Z"
    body = {"name": "report", "type": "ONCE", "runAt": first, "target": {"handler": "noop"}}
    job_id = create(api, body)
    api.patch(f"/v1/jobs/{job_id}", {"runAt": later}, format="json")
    assert pending(job_id).scheduled_for == datetime.fromisoformat(later)

    response = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert response.status_code == 200, response.content
    assert versions(api, job_id)[0]["definition"]["runAt"] == first
    assert pending(job_id).scheduled_for == datetime.fromisoformat(first)


def test_restore_of_a_delayed_job_whose_delay_is_unchanged_keeps_its_time(api, tenant):
    """Only what differs is applied: restoring a name keeps the DELAYED job's run where it was
    (sending its delay again would count it from now)."""
    job_id = create(api, {"name": "a", "type": "DELAYED", "delaySec": 600, "target": {"handler": "noop"}})
    run_at = Job.objects.get(pk=job_id).run_at
    api.patch(f"/v1/jobs/{job_id}", {"name": "b"}, format="json")

    response = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert response.status_code == 200
    job = Job.objects.get(pk=job_id)
    assert (job.name, job.run_at) == ("a", run_at)
    assert versions(api, job_id)[0]["changes"] == [{"field": "name", "from": "b", "to": "a"}]


def test_restoring_the_current_definition_records_no_version(api, tenant):
    job_id = create(api)

    response = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert response.status_code == 200
    assert response.json()["version"] == versions(api, job_id)[0]
    assert [v["version"] for v in versions(api, job_id)] == [1]
    assert not JobVersion.objects.filter(job_id=job_id).exists()


@pytest.mark.parametrize("number", ["0", "2", "99", "99999999999999999999", "-1", "x", "1.0", "\u0661"])
def test_restore_of_an_unknown_version_is_a_json_404(api, tenant, number):
    """A number the job has no version of, or a path part that is no number, is the API's 404."""
    job_id = create(api)

    response = api.post(f"/v1/jobs/{job_id}/versions/{number}/restore")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert [v["version"] for v in versions(api, job_id)] == [1]


def test_another_tenants_job_is_404_for_its_versions_and_their_restore(api, other_api, tenant):
    job_id = create(api)
    api.patch(f"/v1/jobs/{job_id}", {"name": "renamed"}, format="json")

    assert other_api.get(f"/v1/jobs/{job_id}/versions").status_code == 404
    assert other_api.post(f"/v1/jobs/{job_id}/versions/1/restore").status_code == 404
    assert Job.objects.get(pk=job_id).name == "renamed"
    assert api.get("/v1/jobs/not-a-uuid/versions").status_code == 404


def test_restore_of_a_version_whose_handler_is_gone_is_the_400_a_put_would_give(api, tenant, monkeypatch):
    """A version names a handler that is no longer registered: the restore is refused as a PUT of
    that target is, naming the field, and nothing changes."""
    job_id = create(api)
    api.patch(f"/v1/jobs/{job_id}", {"target": {"handler": "sleep"}, "payload": {"seconds": 1}}, format="json")
    real_get = registry.get
    monkeypatch.setattr(registry, "get", lambda name: None if name == "noop" else real_get(name))

    restore = api.post(f"/v1/jobs/{job_id}/versions/1/restore")
    put = api.put(f"/v1/jobs/{job_id}", {"target": {"handler": "noop"}}, format="json")

    assert restore.status_code == put.status_code == 400
    assert restore.json() == put.json()
    assert "handler" in restore.json()["target"]
    assert Job.objects.get(pk=job_id).handler == "sleep"
    assert JobVersion.objects.filter(job_id=job_id).count() == 2


def test_restore_on_a_cancelled_job_answers_as_a_put_does(api, tenant):
    job_id = create(api)
    api.patch(f"/v1/jobs/{job_id}", {"name": "renamed"}, format="json")
    api.delete(f"/v1/jobs/{job_id}")

    restore = api.post(f"/v1/jobs/{job_id}/versions/1/restore")
    put = api.put(f"/v1/jobs/{job_id}", {"name": "hourly"}, format="json")

    assert restore.status_code == put.status_code == 409
    assert JobVersion.objects.filter(job_id=job_id).count() == 2


def test_versions_are_paginated_newest_first(api, tenant):
    job_id = create(api)
    for n in range(2, 6):
        api.patch(f"/v1/jobs/{job_id}", {"name": f"name {n}"}, format="json")

    first = api.get(f"/v1/jobs/{job_id}/versions?pageSize=2").json()
    second = api.get(first["next"]).json()

    assert [v["version"] for v in first["results"]] == [5, 4]
    assert [v["version"] for v in second["results"]] == [3, 2]


def test_a_session_is_recorded_by_its_username(client, django_user_model, tenant, make_job):
    """A change made through the API with a staff session names the user."""
    client.force_login(django_user_model.objects.create_user(username="olivia", password="x", is_staff=True))
    job = make_job(tenant)

    response = client.patch(f"/v1/jobs/{job.pk}", {"name": "k"}, content_type="application/json")

    assert response.status_code == 200, response.content
    assert JobVersion.objects.get(job=job, number=2).actor == "user olivia"


@pytest.mark.parametrize(
    ("body", "later"),
    [
        (CRON, {"startAt": "2030-01-01T00:00:00Z", "catchupWindowSec": 600, "pauseAfterFailures": 3}),
        (
            {"name": "on paid", "type": "EVENT", "on": "invoice.paid", "target": {"handler": "noop"}},
            {"debounceSec": 5, "debounceMaxSec": 60},
        ),
    ],
)
def test_restore_of_a_version_without_an_optional_field_unsets_it(api, tenant, body, later):
    """A definition leaves out the fields a job holds only when set (jobs/fields.py, when_set):
    restoring one made before they were set unsets them all, not only some."""
    job_id = create(api, body)
    changed = api.patch(f"/v1/jobs/{job_id}", later, format="json")
    assert changed.status_code == 200, changed.content

    response = api.post(f"/v1/jobs/{job_id}/versions/1/restore")

    assert response.status_code == 200, response.content
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert {name: job[name] for name in later} == dict.fromkeys(later)
    assert {change["field"] for change in versions(api, job_id)[0]["changes"]} >= set(later)
