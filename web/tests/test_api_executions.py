"""The /v1/executions endpoints: lists with filters, detail with history, cancel and re-drive."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from testing.harness import within_db_clock

pytestmark = pytest.mark.django_db

EXECUTION_FIELDS = {
    "executionId",
    "jobId",
    "attempt",
    "state",
    "scheduledFor",
    "availableAt",
    "queuedAt",
    "startedAt",
    "finishedAt",
    "workerId",
    "result",
    "error",
}


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


# --- GET /v1/executions -----------------------------------------------------------------------------


def test_list_shows_every_execution_of_the_tenant_newest_scheduled_first(api, tenant, make_job):
    """The list is paginated ({"results", "next"}) and ordered by scheduledFor, newest first."""
    now = timezone.now()
    for hours in (2, 5, 1):
        make_job(tenant, run_at=now + timedelta(hours=hours))

    response = api.get("/v1/executions")

    assert response.status_code == 200
    data = response.json()
    assert data["next"] is None
    assert len(data["results"]) == 3
    assert EXECUTION_FIELDS <= data["results"][0].keys()
    scheduled = [parse(e["scheduledFor"]) for e in data["results"]]
    assert scheduled == sorted(scheduled, reverse=True)
    assert all(e["scheduledFor"].endswith("Z") for e in data["results"])


def test_list_cursor_pagination_reaches_every_execution_once(api, tenant, make_job):
    """Following `next` with pageSize=2 visits all five executions exactly once."""
    made = {str(make_job(tenant).executions.get().pk) for _ in range(5)}

    seen, url = [], "/v1/executions?pageSize=2"
    while url:
        data = api.get(url).json()
        seen += [e["executionId"] for e in data["results"]]
        url = data["next"]

    assert sorted(seen) == sorted(made)


def test_list_filters_by_state_dead_letter_view(api, tenant, make_job, drive):
    """state=DEAD lists the dead-letter executions only; several states may be given."""
    dead = drive(make_job(tenant).executions.get(), "DEAD")
    succeeded = drive(make_job(tenant).executions.get(), "SUCCEEDED")
    make_job(tenant)  # PENDING

    dead_only = api.get("/v1/executions?state=DEAD").json()["results"]
    finished = api.get("/v1/executions?state=DEAD&state=SUCCEEDED").json()["results"]

    assert [e["executionId"] for e in dead_only] == [str(dead.pk)]
    assert dead_only[0]["state"] == "DEAD"
    assert {e["executionId"] for e in finished} == {str(dead.pk), str(succeeded.pk)}


def test_list_filters_by_job_id(api, tenant, make_job):
    """jobId lists that job's executions only."""
    job = make_job(tenant, type="CRON")
    make_job(tenant)

    results = api.get(f"/v1/executions?jobId={job.pk}").json()["results"]

    assert [e["jobId"] for e in results] == [str(job.pk)]


def test_list_filters_by_pool(api, tenant, make_job):
    """pool lists the executions waiting for or run by that pool."""
    batch = make_job(tenant, pool="batch")
    make_job(tenant)

    results = api.get("/v1/executions?pool=batch").json()["results"]

    assert [e["jobId"] for e in results] == [str(batch.pk)]


@pytest.mark.parametrize(("query", "field"), [("state=ASLEEP", "state"), ("jobId=not-a-uuid", "jobId")])
def test_list_with_a_bad_filter_value_is_400(api, query, field):
    """A filter value that cannot match anything by construction is an error naming the filter."""
    response = api.get(f"/v1/executions?{query}")

    assert response.status_code == 400
    assert field in response.json()


# --- GET /v1/executions/{id} ------------------------------------------------------------------------


def test_detail_has_the_history_as_events(api, tenant, make_job, drive):
    """The detail adds `events`: each transition with time, from, to, attempt, worker and message,
    oldest first, starting from the creation (from null)."""
    execution = drive(make_job(tenant).executions.get(), "SUCCEEDED")

    response = api.get(f"/v1/executions/{execution.pk}")

    assert response.status_code == 200
    data = response.json()
    assert EXECUTION_FIELDS <= data.keys()
    assert data["state"] == "SUCCEEDED"
    assert data["result"] == {"ok": True}
    assert data["workerId"] == "worker-1"
    for name in ("queuedAt", "startedAt", "finishedAt"):
        assert data[name].endswith("Z")
    events = data["events"]
    assert [(e["from"], e["to"]) for e in events] == [
        (None, "PENDING"),
        ("PENDING", "QUEUED"),
        ("QUEUED", "RUNNING"),
        ("RUNNING", "SUCCEEDED"),
    ]
    assert all({"time", "from", "to", "attempt", "worker", "message"} == e.keys() for e in events)
    assert events[0]["message"] == "scheduled"
    assert events[-1] == {**events[-1], "attempt": 1, "worker": "worker-1", "message": "succeeded"}
    times = [parse(e["time"]) for e in events]
    assert times == sorted(times)


@pytest.mark.parametrize("execution_id", ["00000000-0000-0000-0000-000000000000", "nope"])
def test_detail_of_an_unknown_or_malformed_id_is_404(api, execution_id):
    """An id that names no execution is 404."""
    assert api.get(f"/v1/executions/{execution_id}").status_code == 404


# --- POST /v1/executions/{id}/cancel ----------------------------------------------------------------


@pytest.mark.parametrize("state", ["PENDING", "QUEUED"])
def test_cancel_of_a_not_started_execution_cancels_it_at_once(api, tenant, make_job, drive, state):
    """cancel answers 202; a PENDING or QUEUED execution is CANCELLED now, with an event saying so."""
    execution = make_job(tenant, type="CRON").executions.get()
    if state != "PENDING":
        execution = drive(execution, state)

    response = api.post(f"/v1/executions/{execution.pk}/cancel")

    assert response.status_code == 202
    data = response.json()
    assert data["state"] == "CANCELLED"
    assert data["finishedAt"] is not None
    execution.refresh_from_db()
    assert execution.state == "CANCELLED"
    last = execution.events.last()
    assert (last.from_state, last.to_state) == (state, "CANCELLED")
    assert "cancelled by" in last.message


def test_cancel_of_a_running_execution_is_recorded_for_the_worker(api, tenant, make_job, drive):
    """A RUNNING execution is cancelled cooperatively: 202, still RUNNING, cancelRequestedAt set."""
    execution = drive(make_job(tenant).executions.get(), "RUNNING")

    response = api.post(f"/v1/executions/{execution.pk}/cancel")

    assert response.status_code == 202
    data = response.json()
    assert data["state"] == "RUNNING"
    assert data["cancelRequestedAt"] is not None
    assert "cancel requested" in Execution.objects.get(pk=execution.pk).events.last().message


def test_cancel_of_the_only_execution_completes_a_one_off_job(api, tenant, make_job):
    """A one-off job whose execution is cancelled has nothing left to run: it is COMPLETED."""
    job = make_job(tenant)

    api.post(f"/v1/executions/{job.executions.get().pk}/cancel")

    job.refresh_from_db()
    assert job.standing == "COMPLETED"


@pytest.mark.parametrize("state", ["SUCCEEDED", "DEAD", "CANCELLED"])
def test_cancel_of_a_finished_execution_is_409(api, tenant, make_job, drive, state):
    """A finished execution cannot be cancelled: 409 with a reason, and it stays as it was."""
    execution = drive(make_job(tenant).executions.get(), state)

    response = api.post(f"/v1/executions/{execution.pk}/cancel")

    assert response.status_code == 409
    assert response.json()["detail"]
    execution.refresh_from_db()
    assert execution.state == state


# --- POST /v1/executions/{id}/retry -----------------------------------------------------------------


@pytest.mark.parametrize("state", ["DEAD", "CANCELLED", "FAILED"])
def test_retry_re_drives_a_dead_cancelled_or_failed_execution_as_its_next_attempt(api, tenant, make_job, drive, state):
    """retry answers 200: the execution is PENDING again, attempt + 1, due now, its error cleared;
    the one-off job it belongs to is ACTIVE again."""
    job = make_job(tenant)
    execution = drive(job.executions.get(), state)
    before = timezone.now()

    response = api.post(f"/v1/executions/{execution.pk}/retry")

    assert response.status_code == 200, response.content
    data = response.json()
    assert data["executionId"] == str(execution.pk)
    assert data["state"] == "PENDING"
    assert data["attempt"] == 2
    assert data["error"] == ""
    assert data["finishedAt"] is None
    assert within_db_clock(before, parse(data["availableAt"]), timezone.now())
    job.refresh_from_db()
    assert job.state == "ACTIVE"
    last = Execution.objects.get(pk=execution.pk).events.last()
    assert (last.from_state, last.to_state, last.attempt) == (state, "PENDING", 2)


@pytest.mark.parametrize("state", ["SUCCEEDED", "PENDING", "QUEUED", "RUNNING"])
def test_retry_of_an_execution_that_is_not_failed_is_409(api, tenant, make_job, drive, state):
    """Only DEAD, FAILED and CANCELLED executions can be re-driven; others answer 409 unchanged."""
    execution = make_job(tenant).executions.get()
    if state != "PENDING":
        execution = drive(execution, state)

    response = api.post(f"/v1/executions/{execution.pk}/retry")

    assert response.status_code == 409
    assert response.json()["detail"]
    execution.refresh_from_db()
    assert (execution.state, execution.attempt) == (state, 1)


def test_retry_of_an_execution_of_a_cancelled_job_is_409(api, tenant, make_job):
    """A cancelled job has no future runs, re-drives included."""
    job = make_job(tenant, type="CRON")
    api.delete(f"/v1/jobs/{job.pk}")
    execution = job.executions.get()

    response = api.post(f"/v1/executions/{execution.pk}/retry")

    assert response.status_code == 409
    execution.refresh_from_db()
    assert (execution.state, execution.attempt) == ("CANCELLED", 1)
