"""INTERVAL jobs through the API: `{"type": "INTERVAL", "everySec": 90, "startAt": …}` fires at
startAt + k * everySec, anchored; with misfire and overlap policies, pause and resume (dry run
too), trigger, versions, nextFireAt and the schedule preview as for CRON. The fires themselves
are jobs/tests/test_interval.py's; a real 2 s interval job runs in tests_e2e/test_e2e_interval.py."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from background.publisher import InMemoryPublisher
from dispatcher import dispatcher
from executions.models import Execution
from jobs.models import Job
from testing.harness import within_db_clock

pytestmark = pytest.mark.django_db


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def create(api, **fields):
    body = {"name": "every 90 s", "type": "INTERVAL", "everySec": 90, "target": {"handler": "noop"}, **fields}
    return api.post("/v1/jobs", body, format="json")


def test_an_interval_job_fires_first_at_its_start_then_every_period(api):
    start = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    response = create(api, startAt=iso(start))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["type"], body["everySec"], body["startAt"], body["nextFireAt"]) == (
        "INTERVAL",
        90,
        iso(start),
        iso(start),
    )
    assert body["schedule"] == "" and body["timezone"] == "UTC"
    execution = Execution.objects.get(job_id=body["jobId"])
    assert execution.scheduled_for == start


def test_without_a_start_it_fires_at_once_and_is_anchored_there(api):
    before = timezone.now()
    body = create(api).json()
    job = Job.objects.get(pk=body["jobId"])
    assert within_db_clock(before, job.start_at, timezone.now())
    assert job.next_fire_at == job.start_at
    assert body["startAt"] == iso(job.start_at)


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"everySec": None}, {"everySec": ["is required for type INTERVAL"]}),
        ({"everySec": 0}, {"everySec": ["Ensure this value is greater than or equal to 1."]}),
        ({"everySec": 1.5}, {"everySec": ["A valid integer is required."]}),
        ({"schedule": "* * * * *"}, {"schedule": ["is not allowed for type INTERVAL"]}),
        ({"timezone": "Europe/Paris"}, {"timezone": ["is only used by CRON jobs, not INTERVAL"]}),
        ({"startAt": "2027-01-01T00:00:00"}, {"startAt": ["must include a UTC offset, e.g. 2027-03-14T09:00:00Z"]}),
    ],
)
def test_bad_interval_fields_are_a_400_naming_the_field(api, fields, errors):
    response = create(api, **fields)
    assert response.status_code == 400
    ((name, (message,)),) = errors.items()
    assert response.json() == {**errors, "code": "invalid", "detail": f"{name}: {message}"}


def test_start_at_is_for_recurring_jobs_only(api):
    body = {
        "name": "x",
        "type": "DELAYED",
        "delaySec": 5,
        "startAt": iso(timezone.now()),
        "target": {"handler": "noop"},
    }
    response = api.post("/v1/jobs", body, format="json")
    assert response.json() == {
        "startAt": ["is only used by CRON and INTERVAL jobs, not DELAYED"],
        "code": "invalid",
        "detail": "startAt: is only used by CRON and INTERVAL jobs, not DELAYED",
    }


def test_a_cron_job_with_a_start_fires_first_after_it(api):
    start = datetime(2031, 6, 1, 10, 30, tzinfo=UTC)
    body = {"name": "c", "type": "CRON", "schedule": "0 * * * *", "startAt": iso(start), "target": {"handler": "noop"}}
    created = api.post("/v1/jobs", body, format="json").json()
    assert created["nextFireAt"] == "2031-06-01T11:00:00Z"


def test_each_claimed_fire_makes_the_next_on_the_grid(api, settings):
    """The dispatcher's claim materialises the fire after each: start + k * every, never shifted
    by when the claim happened."""
    settings.TICKWORK_ADMIT_HEADROOM = 100
    from pools import registry

    start = timezone.now() + timedelta(seconds=1)
    registry.register(hostname="w", pid=1, pools=["default"], slots=4, now=timezone.now())
    job_id = create(api, everySec=60, startAt=iso(start), misfirePolicy="RUN_ALL").json()["jobId"]
    publisher = InMemoryPublisher()
    dispatcher.run_once(now=start + timedelta(seconds=7.3), publisher=publisher)
    fires = sorted(Execution.objects.filter(job_id=job_id).values_list("scheduled_for", flat=True))
    assert fires == [start, start + timedelta(seconds=60)]
    assert Job.objects.get(pk=job_id).next_fire_at == start + timedelta(seconds=60)


def test_patch_of_the_period_re_times_the_pending_fire(api):
    start = timezone.now() + timedelta(hours=1)
    job_id = create(api, startAt=iso(start)).json()["jobId"]
    new_start = start + timedelta(minutes=30)
    response = api.patch(f"/v1/jobs/{job_id}", {"everySec": 600, "startAt": iso(new_start)}, format="json")
    assert response.status_code == 200, response.json()
    assert Execution.objects.get(job_id=job_id).scheduled_for == new_start
    versions = api.get(f"/v1/jobs/{job_id}/versions").json()["results"]
    changed = {change["field"] for change in versions[0]["changes"]}
    assert changed == {"everySec", "startAt"}


def test_resume_dry_run_counts_the_missed_fires(api, tenant, make_job):
    """Paused for an hour with RUN_ALL: the 40 missed 90 s fires would each run."""
    created = timezone.now() - timedelta(hours=1)
    job = make_job(tenant, type="INTERVAL", every_sec=90, start_at=created, misfire_policy="RUN_ALL", now=created)
    assert api.post(f"/v1/jobs/{job.pk}/pause").status_code == 200
    preview = api.post(f"/v1/jobs/{job.pk}/resume?dryRun=true").json()
    assert preview["wouldRunCount"] in (40, 41)
    assert preview["wouldRun"][:2] == [iso(created), iso(created + timedelta(seconds=90))]
    assert datetime.fromisoformat(preview["nextFireAt"]) > timezone.now()


def test_trigger_runs_now_and_keeps_the_schedule(api):
    start = timezone.now() + timedelta(hours=1)
    job_id = create(api, startAt=iso(start)).json()["jobId"]
    assert api.post(f"/v1/jobs/{job_id}/trigger").status_code == 200
    scheduled = sorted(Execution.objects.filter(job_id=job_id).values_list("scheduled_for", flat=True))
    assert len(scheduled) == 2 and scheduled[-1] == start


def test_the_preview_takes_every_sec(client):
    response = client.get(
        "/v1/schedule/preview", {"everySec": 90, "startAt": "2027-03-28T00:30:00Z", "after": "2027-03-28T00:31:00Z"}
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert [f["utc"] for f in body["fireTimes"]] == [
        "2027-03-28T00:31:30Z",
        "2027-03-28T00:33:00Z",
        "2027-03-28T00:34:30Z",
        "2027-03-28T00:36:00Z",
        "2027-03-28T00:37:30Z",
    ]
    assert (body["everySec"], body["startAt"], body["schedule"]) == (90, "2027-03-28T00:30:00Z", "")


@pytest.mark.parametrize(
    ("query", "errors"),
    [
        ({}, {"schedule": ["give a schedule or everySec (an interval), one of them"]}),
        (
            {"schedule": "* * * * *", "everySec": 5},
            {"schedule": ["give a schedule or everySec (an interval), one of them"]},
        ),
        ({"schedule": "* * * * *", "startAt": "2027-01-01T00:00:00Z"}, {"startAt": ["is only used with everySec"]}),
        ({"everySec": 0}, {"everySec": ["Ensure this value is greater than or equal to 1."]}),
    ],
)
def test_a_bad_preview_is_a_400_naming_the_field(client, query, errors):
    response = client.get("/v1/schedule/preview", query)
    assert response.status_code == 400
    ((name, (message,)),) = errors.items()
    assert response.json() == {**errors, "code": "invalid", "detail": f"{name}: {message}"}
