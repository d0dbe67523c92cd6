"""POST /v1/jobs/{id}/backfill, GET /v1/backfills/{id}, its cancel and a job's list: the fires
each made once, the dry run that writes nothing, reprocess, the limits, the tenant's scope."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from executions.models import Backfill, BackfillFire, Execution, Origin
from executions.states import ExecutionState as S
from scheduling.backfills import backfill_release

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 1, tzinfo=UTC)
RANGE = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T06:00:00Z"}  # 6 hourly fires


@pytest.fixture
def job(tenant, make_job):
    return make_job(tenant, type="CRON", schedule="0 * * * *", name="hourly")


def _post(api, job_id, **body):
    return api.post(f"/v1/jobs/{job_id}/backfill", {**RANGE, **body}, format="json")


def _release_all(now=None):
    """Release every fire of every backfill (maxConcurrent aside) as the service would over time."""
    now = now or timezone.now()
    for backfill in Backfill.objects.all():
        Backfill.objects.filter(pk=backfill.pk).update(max_concurrent=100)
    backfill_release(now=now, limit=10_000)


def test_a_backfill_plans_its_fires_and_releases_them_as_backfill_runs(api, job):
    answer = _post(api, job.pk, maxConcurrent=2)
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert answer["Location"] == f"http://testserver/v1/backfills/{body['backfillId']}"
    assert (body["state"], body["maxConcurrent"], body["order"], body["reprocess"]) == (
        "RUNNING",
        2,
        "OLDEST_FIRST",
        "NONE",
    )
    assert (body["counts"]["fires"], body["counts"]["waiting"], body["counts"]["PENDING"]) == (6, 6, 0)

    released, _ = backfill_release(now=timezone.now(), limit=500)
    assert released == 2  # maxConcurrent
    made = list(Execution.objects.filter(job=job, origin=Origin.BACKFILL).order_by("scheduled_for"))
    assert [e.scheduled_for for e in made] == [DAY, DAY + timedelta(hours=1)]
    assert backfill_release(now=timezone.now(), limit=500) == (0, 0)  # nothing finished: no room

    detail = api.get(f"/v1/backfills/{body['backfillId']}").json()
    assert (detail["counts"]["released"], detail["counts"]["PENDING"], detail["counts"]["waiting"]) == (2, 2, 4)


def test_newest_first_releases_the_latest_fire_first(api, job):
    assert _post(api, job.pk, order="NEWEST_FIRST").status_code == 201
    backfill_release(now=timezone.now(), limit=500)
    (made,) = Execution.objects.filter(job=job, origin=Origin.BACKFILL)
    assert made.scheduled_for == DAY + timedelta(hours=5)


def test_the_dry_run_lists_each_fire_and_writes_nothing(api, job):
    before = (Execution.objects.count(), AuditEntry.objects.count())
    answer = _post(api, job.pk, dryRun=True)
    assert answer.status_code == 200
    fires = answer.json()["fires"]
    assert [f["scheduledFor"] for f in fires] == [f"2026-03-01T0{h}:00:00Z" for h in range(6)]
    assert {f["action"] for f in fires} == {"RUN"}
    assert not Backfill.objects.exists() and not BackfillFire.objects.exists()
    assert (Execution.objects.count(), AuditEntry.objects.count()) == before


def test_a_second_backfill_of_the_range_creates_nothing_new(api, job):
    _post(api, job.pk)
    _post(api, job.pk)  # before the first released anything: its planned fires count as runs
    _release_all()
    assert Execution.objects.filter(job=job, origin=Origin.BACKFILL).count() == 6
    again = _post(api, job.pk).json()
    assert (again["counts"]["fires"], again["counts"]["skipped"]) == (0, 6)
    _release_all()
    assert Execution.objects.filter(job=job, origin=Origin.BACKFILL).count() == 6
    plan = _post(api, job.pk, dryRun=True).json()["fires"]
    assert {f["action"] for f in plan} == {"SKIP"}


def test_reprocess_failed_reruns_the_failed_fires_only_and_all_reruns_every_one(api, job, drive):
    _post(api, job.pk)
    _release_all()
    made = list(Execution.objects.filter(job=job, origin=Origin.BACKFILL).order_by("scheduled_for"))
    for execution in made[:4]:
        drive(execution, S.SUCCEEDED)
    drive(made[4], S.DEAD)
    drive(made[5], S.CANCELLED)

    plan = _post(api, job.pk, reprocess="FAILED", dryRun=True).json()["fires"]
    assert [f["action"] for f in plan] == ["SKIP"] * 4 + ["RERUN"] * 2
    assert _post(api, job.pk, reprocess="FAILED").json()["counts"]["fires"] == 2
    _release_all()
    assert Execution.objects.filter(job=job, origin=Origin.BACKFILL).count() == 8

    plan = _post(api, job.pk, reprocess="ALL", dryRun=True).json()["fires"]
    assert [f["action"] for f in plan] == ["RERUN"] * 6


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"from": "2026-03-01T06:00:00Z", "to": "2026-03-01T06:00:00Z"}, "to"),
        ({"from": "2026-03-01T06:00:00Z", "to": "2026-03-01T05:00:00Z"}, "to"),
        ({"from": "2000-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "to"),  # beyond 10,000 fires
        ({"to": "2999-01-01T00:00:00Z"}, "to"),  # the future is the schedule's
        ({"from": "yesterday"}, "from"),
        ({"maxConcurrent": 0}, "maxConcurrent"),
        ({"maxConcurrent": 101}, "maxConcurrent"),
        ({"order": "RANDOM"}, "order"),
        ({"reprocess": "SOME"}, "reprocess"),
    ],
)
def test_a_bad_request_answers_400_naming_the_field(api, job, body, field):
    answer = _post(api, job.pk, **body)
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()
    assert not Backfill.objects.exists()


def test_a_dry_run_of_the_future_is_refused_too(api, job):
    answer = _post(api, job.pk, to="2999-01-01T00:00:00Z", dryRun=True)
    assert answer.status_code == 400
    assert "to" in answer.json()


def test_a_job_without_a_schedule_cannot_be_backfilled(api, tenant, make_job):
    once = make_job(tenant, type="ONCE")
    answer = _post(api, once.pk)
    assert answer.status_code == 400
    assert "type" in answer.json()


def test_another_tenants_job_and_backfill_are_not_found(api, other_api, job):
    backfill_id = _post(api, job.pk).json()["backfillId"]
    assert _post(other_api, job.pk).status_code == 404
    assert other_api.get(f"/v1/backfills/{backfill_id}").status_code == 404
    assert other_api.post(f"/v1/backfills/{backfill_id}/cancel").status_code == 404
    assert other_api.get(f"/v1/jobs/{job.pk}/backfills").status_code == 404
    assert api.get("/v1/backfills/not-an-id").status_code == 404
    assert Backfill.objects.get().state == "RUNNING"


def test_cancel_stops_the_releases_and_cancels_the_runs_not_started(api, job):
    backfill_id = _post(api, job.pk, maxConcurrent=3).json()["backfillId"]
    backfill_release(now=timezone.now(), limit=500)
    answer = api.post(f"/v1/backfills/{backfill_id}/cancel")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["state"], body["counts"]["CANCELLED"], body["counts"]["waiting"]) == ("CANCELLED", 3, 3)
    assert backfill_release(now=timezone.now(), limit=500) == (0, 0)
    listed = api.get(f"/v1/jobs/{job.pk}/backfills").json()["results"]
    assert [b["backfillId"] for b in listed] == [backfill_id]


def test_creation_and_cancel_are_audited(api, job):
    backfill_id = _post(api, job.pk).json()["backfillId"]
    api.post(f"/v1/backfills/{backfill_id}/cancel")
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "target_type", "outcome"))
    assert entries[-2:] == [("backfill.create", "job", "OK"), ("backfill.cancel", "backfill", "OK")]
    assert AuditEntry.objects.get(action="backfill.create").detail.startswith(f"backfill {backfill_id}: 6 fires")


def test_a_finished_backfill_is_done(api, job, drive):
    backfill_id = _post(api, job.pk).json()["backfillId"]
    _release_all()
    for execution in Execution.objects.filter(job=job, origin=Origin.BACKFILL):
        drive(execution, S.SUCCEEDED)
    assert backfill_release(now=timezone.now(), limit=500) == (0, 1)
    body = api.get(f"/v1/backfills/{backfill_id}").json()
    assert (body["state"], body["counts"]["SUCCEEDED"]) == ("DONE", 6)


def test_a_paused_jobs_backfill_waits(api, job):
    api.post(f"/v1/jobs/{job.pk}/pause")
    _post(api, job.pk)
    assert backfill_release(now=timezone.now(), limit=500) == (0, 0)
    api.post(f"/v1/jobs/{job.pk}/resume")
    assert backfill_release(now=timezone.now(), limit=500) == (1, 0)
