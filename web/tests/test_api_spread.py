"""Spreading (`H` in a cron schedule) through the API, the dispatcher and the dashboard: a job's
H values are resolved with its id, once and for its life; the preview needs a seed to resolve them."""

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from dashboard.selectors import next_fires
from executions.models import Execution
from jobs import cron
from jobs.models import Job
from testing.steps import dispatch

pytestmark = pytest.mark.django_db


def cron_body(**changes) -> dict:
    body = {"name": "spread", "type": "CRON", "schedule": "H 0 * * *", "target": {"handler": "noop"}}
    body.update(changes)
    return body


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def test_jobs_with_h_get_their_own_minute_resolved_from_their_id(api):
    """Five `H 0 * * *` jobs: each one's nextFireAt is its schedule resolved with its jobId (a
    fire at 00:mm UTC), and they do not all share one minute (that would take 60^-4 luck)."""
    minutes = set()
    for _ in range(5):
        response = api.post("/v1/jobs", cron_body(), format="json")
        assert response.status_code == 201, response.content
        data = response.json()
        assert data["schedule"] == "H 0 * * *"  # stored and shown as written
        fire = parse(data["nextFireAt"])
        resolved = cron.resolve("H 0 * * *", data["jobId"])
        assert (fire.hour, fire.minute, fire.second) == (0, int(resolved.split()[0]), 0)
        pending = Execution.objects.get(job_id=data["jobId"], state="PENDING")
        assert pending.scheduled_for == fire
        minutes.add(fire.minute)
    assert len(minutes) > 1


def test_a_job_keeps_its_resolved_time_across_updates(api):
    """An update of another field leaves nextFireAt alone; a new timezone re-times the job with
    the same resolved wall time (its id, so its H values, do not change)."""
    data = api.post("/v1/jobs", cron_body(schedule="H H * * *"), format="json").json()
    first = data["nextFireAt"]
    resolved = cron.resolve("H H * * *", data["jobId"])

    renamed = api.patch(f"/v1/jobs/{data['jobId']}", {"name": "renamed", "payload": {"a": 1}}, format="json")
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["nextFireAt"] == first

    moved = api.patch(f"/v1/jobs/{data['jobId']}", {"timezone": "Asia/Tokyo"}, format="json").json()
    local = parse(moved["nextFireAt"]).astimezone(cron.parse_timezone("Asia/Tokyo"))
    minute, hour = (int(v) for v in resolved.split()[:2])
    assert (local.hour, local.minute) == (hour, minute)


def test_dispatcher_materialises_the_next_fire_with_the_jobs_own_resolution(tenant, make_job):
    """After a fire is claimed, the next one is the resolved schedule's next fire, and the job's
    next_fire_at says so."""
    created = datetime(2027, 5, 1, 12, tzinfo=UTC)
    job = make_job(tenant, type="CRON", schedule="H H * * *", now=created)
    resolved = cron.resolve("H H * * *", str(job.pk))
    first = Execution.objects.get(job=job).scheduled_for
    assert first == cron.next_fire(resolved, "UTC", created)

    result, _ = dispatch(first)

    assert result.claimed == 1 and result.materialised == 1
    following = Execution.objects.get(job=job, state="PENDING").scheduled_for
    assert following == first + timedelta(days=1) == cron.next_fire(resolved, "UTC", first)
    assert Job.objects.get(pk=job.pk).next_fire_at == following


def test_dashboard_shows_the_jobs_resolved_fires(tenant, make_job):
    now = datetime(2027, 5, 1, 12, tzinfo=UTC)
    job = make_job(tenant, type="CRON", schedule="H(0-29)/10 * * * *", now=now)
    fires = next_fires(job=job, now=now, count=3)
    assert [f.utc for f in fires] == cron.fires_after(cron.resolve(job.schedule, str(job.pk)), "UTC", now, 3)


def test_create_refuses_a_bad_h_range_naming_the_field(api):
    response = api.post("/v1/jobs", cron_body(schedule="H(50-70) * * * *"), format="json")
    assert response.status_code == 400
    assert "minute field: 70 is out of range 0-59" in response.json()["schedule"][0]
    response = api.post("/v1/jobs", cron_body(schedule="0 0 H(29-31) 2 *"), format="json")
    assert response.status_code == 400 and "never fires for some jobs" in response.json()["schedule"][0]
    assert not Job.objects.exists()


# --- GET /v1/schedule/preview?seed= ----------------------------------------------------------------


def test_preview_of_an_h_schedule_without_a_seed_answers_400_naming_seed(client):
    response = client.get("/v1/schedule/preview", {"schedule": "H H * * *"})
    assert response.status_code == 400
    assert "seed" in response.json() and "H" in response.json()["seed"][0]


def test_preview_with_a_seed_shows_that_jobs_times(api, client):
    """With seed=<jobId>, the preview's times are the job's own, and resolvedSchedule spells
    the plain expression they come from."""
    job = api.post("/v1/jobs", cron_body(schedule="H H * * *", timezone="Europe/Berlin"), format="json").json()
    response = client.get(
        "/v1/schedule/preview",
        {"schedule": "H H * * *", "timezone": "Europe/Berlin", "seed": job["jobId"], "count": 2},
    )
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["resolvedSchedule"] == cron.resolve("H H * * *", job["jobId"])
    assert parse(data["fireTimes"][0]["utc"]) == parse(job["nextFireAt"])
    assert parse(data["fireTimes"][1]["utc"]) - parse(data["fireTimes"][0]["utc"]) == timedelta(days=1)


def test_preview_of_a_plain_schedule_ignores_the_seed(client):
    params = {"schedule": "0 9 * * *", "after": "2027-01-01T00:00:00Z", "count": 1}
    plain = client.get("/v1/schedule/preview", params).json()
    seeded = client.get("/v1/schedule/preview", {**params, "seed": "whatever"}).json()
    assert "resolvedSchedule" not in plain
    assert seeded == {**plain, "resolvedSchedule": "0 9 * * *"}


def test_preview_refuses_a_bad_h_range_naming_schedule(client):
    response = client.get("/v1/schedule/preview", {"schedule": "H(50-70) * * * *", "seed": "x"})
    assert response.status_code == 400
    assert "minute field" in response.json()["schedule"][0]


def test_schema_describes_the_seed_parameter_and_h_in_schedules(client):
    schema = yaml.safe_load(client.get("/v1/schema").content)
    parameters = {p["name"]: p for p in schema["paths"]["/v1/schedule/preview"]["get"]["parameters"]}
    assert parameters["seed"]["in"] == "query" and not parameters["seed"].get("required", False)
    assert "H" in parameters["seed"]["description"]
    preview = schema["components"]["schemas"]["SchedulePreview"]
    assert "resolvedSchedule" in preview["properties"] and "resolvedSchedule" not in preview["required"]
