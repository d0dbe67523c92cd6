"""The /v1/jobs endpoints as the public API contract (docs: DESIGN.md, "Public API contract") writes them."""

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.utils import timezone

from executions.models import Execution, Origin
from jobs import cron
from jobs.models import Job
from testing.harness import within_db_clock

pytestmark = pytest.mark.django_db

RUN_AT = "2031-03-14T09:00:00Z"
JOB_FIELDS = {
    "jobId",
    "name",
    "type",
    "runAt",
    "delaySec",
    "schedule",
    "timezone",
    "target",
    "payload",
    "retryPolicy",
    "timeoutSec",
    "priority",
    "misfirePolicy",
    "concurrencyPolicy",
    "state",
    "nextFireAt",
    "createdAt",
    "updatedAt",
}


def once_body(**changes) -> dict:
    body = {"name": "nightly report", "type": "ONCE", "runAt": RUN_AT, "target": {"handler": "noop"}, "payload": {}}
    body.update(changes)
    return body


def delayed_body(**changes) -> dict:
    body = {"name": "reminder", "type": "DELAYED", "delaySec": 600, "target": {"handler": "noop"}}
    body.update(changes)
    return body


def cron_body(**changes) -> dict:
    body = {"name": "hourly", "type": "CRON", "schedule": "0 * * * *", "target": {"handler": "noop"}}
    body.update(changes)
    return body


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def counts() -> tuple[int, int]:
    return Job.objects.count(), Execution.objects.count()


# --- POST /v1/jobs ---------------------------------------------------------------------------------


def test_create_once_job_answers_201_with_every_contract_field_and_makes_its_first_execution(api, tenant):
    """A ONCE job is created ACTIVE, due at runAt, with one PENDING execution scheduled for runAt."""
    response = api.post("/v1/jobs", once_body(payload={"report": "sales"}), format="json")

    assert response.status_code == 201, response.content
    data = response.json()
    assert JOB_FIELDS <= data.keys()
    assert data["type"] == "ONCE"
    assert data["state"] == "ACTIVE"
    assert data["runAt"] == RUN_AT
    assert data["nextFireAt"] == RUN_AT
    assert data["target"] == {"pool": "default", "handler": "noop"}
    assert data["payload"] == {"report": "sales"}
    assert data["createdAt"].endswith("Z") and data["updatedAt"].endswith("Z")
    job = Job.objects.get(pk=data["jobId"])
    assert job.tenant == tenant
    (execution,) = job.executions.all()
    assert execution.state == "PENDING"
    assert execution.attempt == 1
    assert execution.scheduled_for == execution.available_at == parse(RUN_AT)


def test_create_applies_documented_defaults(api):
    """Unset fields take their defaults: UTC, NORMAL, RUN_ONCE, ALLOW, 3 exponential attempts,
    an empty payload, and the handler's own pool."""
    data = api.post("/v1/jobs", {k: v for k, v in once_body().items() if k != "payload"}, format="json").json()

    assert data["timezone"] == "UTC"
    assert data["priority"] == "NORMAL"
    assert data["misfirePolicy"] == "RUN_ONCE"
    assert data["concurrencyPolicy"] == "ALLOW"
    assert data["payload"] == {}
    assert data["target"]["pool"] == "default"
    assert data["retryPolicy"] == {
        "maxAttempts": 3,
        "backoff": "EXPONENTIAL",
        "initialDelayMs": 1000,
        "maxDelayMs": 60000,
        "jitter": True,
    }


def test_create_with_every_optional_field_round_trips_them(api):
    """Whatever the caller sets comes back as set, in the contract's names."""
    body = cron_body(
        schedule="30 2 * * *",
        timezone="America/Los_Angeles",
        payload={"nested": {"list": [1, 2, 3]}},
        retryPolicy={"maxAttempts": 5, "backoff": "FIXED", "initialDelayMs": 250, "maxDelayMs": 250, "jitter": False},
        timeoutSec=90,
        priority="HIGH",
        misfirePolicy="SKIP",
        concurrencyPolicy="FORBID",
    )
    data = api.post("/v1/jobs", body, format="json").json()

    for name in ("schedule", "timezone", "payload", "retryPolicy", "timeoutSec", "priority"):
        assert data[name] == body[name], name
    assert data["misfirePolicy"] == "SKIP"
    assert data["concurrencyPolicy"] == "FORBID"
    job = Job.objects.get(pk=data["jobId"])
    assert job.executions.get().priority == 0  # HIGH runs first in the claim order


def test_run_at_with_an_offset_is_stored_and_answered_in_utc(api):
    """`2031-03-14T10:00:00+01:00` is the instant 09:00Z; responses give UTC times ending in Z."""
    data = api.post("/v1/jobs", once_body(runAt="2031-03-14T10:00:00+01:00"), format="json").json()

    assert data["runAt"] == RUN_AT
    assert data["nextFireAt"] == RUN_AT


def test_create_delayed_job_is_due_delay_seconds_after_creation(api):
    """A DELAYED job's runAt and its execution are `delaySec` after the request."""
    before = timezone.now()
    data = api.post("/v1/jobs", delayed_body(delaySec=600), format="json").json()
    after = timezone.now()

    assert data["delaySec"] == 600
    due = parse(data["runAt"])
    assert before + timedelta(seconds=600) <= due <= after + timedelta(seconds=600)
    assert parse(data["nextFireAt"]) == due
    assert Execution.objects.get(job_id=data["jobId"]).available_at == due


def test_create_cron_job_is_due_at_the_next_fire_in_its_timezone(api):
    """A CRON job's first execution is the next fire of its schedule, evaluated in its timezone."""
    before = timezone.now()
    data = api.post("/v1/jobs", cron_body(schedule="0 9 * * *", timezone="Europe/Paris"), format="json").json()

    fire = parse(data["nextFireAt"])
    local = fire.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute) == (9, 0)
    assert before < fire <= before + timedelta(days=1, hours=1)
    assert fire == cron.next_fire("0 9 * * *", "Europe/Paris", before)
    execution = Execution.objects.get(job_id=data["jobId"])
    assert execution.scheduled_for == fire
    assert execution.origin == Origin.SCHEDULE


def test_create_in_a_configured_extra_pool(api, settings):
    """A target may name any configured pool, not only the handler's default one."""
    settings.TICKWORK_POOLS = ["default", "batch"]

    data = api.post("/v1/jobs", once_body(target={"handler": "noop", "pool": "batch"}), format="json").json()

    assert data["target"] == {"pool": "batch", "handler": "noop"}
    assert Execution.objects.get(job_id=data["jobId"]).pool == "batch"


def test_two_posts_without_an_idempotency_key_make_two_jobs(api):
    """Without a key, each POST is a new job."""
    first = api.post("/v1/jobs", once_body(), format="json").json()
    second = api.post("/v1/jobs", once_body(), format="json").json()

    assert first["jobId"] != second["jobId"]
    assert counts() == (2, 2)


def test_same_idempotency_key_and_body_returns_the_first_job_with_200(api):
    """A replay answers 200 with the job the first request made, and makes nothing new."""
    first = api.post("/v1/jobs", once_body(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post("/v1/jobs", once_body(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["jobId"] == first.json()["jobId"]
    assert counts() == (1, 1)


def test_same_idempotency_key_with_another_body_is_409_naming_the_key(api):
    """Reusing a key for a different request is a conflict, and creates nothing."""
    api.post("/v1/jobs", once_body(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    response = api.post("/v1/jobs", once_body(name="other"), format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert response.status_code == 409
    assert response.json()["field"] == "Idempotency-Key"
    assert counts() == (1, 1)


def test_an_overlong_idempotency_key_is_400(api):
    """Keys are at most 255 characters."""
    response = api.post("/v1/jobs", once_body(), format="json", HTTP_IDEMPOTENCY_KEY="k" * 256)

    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    assert counts() == (0, 0)


def test_a_tenant_at_its_active_job_limit_gets_429_and_nothing_is_created(api, tenant):
    """With max_active_jobs reached, a create answers 429 with the reason; a cancelled job frees
    its place."""
    tenant.max_active_jobs = 1
    tenant.save()
    first = api.post("/v1/jobs", once_body(), format="json")

    refused = api.post("/v1/jobs", once_body(), format="json")

    assert refused.status_code == 429
    assert "limit" in refused.json()["detail"]
    assert counts() == (1, 1)
    api.delete(f"/v1/jobs/{first.json()['jobId']}")
    assert api.post("/v1/jobs", once_body(), format="json").status_code == 201


def test_a_tenant_over_its_submit_rate_gets_429(api, tenant):
    """Over submit_rate_per_minute, creates answer 429 until the next minute."""
    tenant.submit_rate_per_minute = 2
    tenant.save()
    minute = timezone.now().replace(second=0, microsecond=0)

    statuses = [api.post("/v1/jobs", once_body(), format="json").status_code for _ in range(3)]

    if timezone.now().replace(second=0, microsecond=0) != minute:
        pytest.skip("the rate window turned over during the test")
    assert statuses == [201, 201, 429]
    assert counts() == (2, 2)


# --- bad input: 400 naming the field, nothing half-created -----------------------------------------

BAD_BODIES = [
    ("unknown handler", once_body(target={"handler": "no-such-handler"}), ["target", "handler"]),
    ("unknown pool", once_body(target={"handler": "noop", "pool": "gpu"}), ["target", "pool"]),
    ("target without handler", once_body(target={"pool": "default"}), ["target", "handler"]),
    ("unknown target field", once_body(target={"handler": "noop", "queue": "x"}), ["target", "queue"]),
    ("cron minute out of range", cron_body(schedule="61 * * * *"), ["schedule"]),
    ("cron with three fields", cron_body(schedule="* * *"), ["schedule"]),
    ("cron that never fires", cron_body(schedule="0 0 30 2 *"), ["schedule"]),
    ("cron gibberish", cron_body(schedule="every day"), ["schedule"]),
    ("unknown timezone", cron_body(timezone="Mars/Olympus_Mons"), ["timezone"]),
    ("missing runAt for ONCE", {k: v for k, v in once_body().items() if k != "runAt"}, ["runAt"]),
    ("null runAt for ONCE", once_body(runAt=None), ["runAt"]),
    ("missing delaySec for DELAYED", {k: v for k, v in delayed_body().items() if k != "delaySec"}, ["delaySec"]),
    ("missing schedule for CRON", {k: v for k, v in cron_body().items() if k != "schedule"}, ["schedule"]),
    ("blank schedule for CRON", cron_body(schedule=""), ["schedule"]),
    ("schedule on a ONCE job", once_body(schedule="0 * * * *"), ["schedule"]),
    ("delaySec on a ONCE job", once_body(delaySec=5), ["delaySec"]),
    ("runAt on a CRON job", cron_body(runAt=RUN_AT), ["runAt"]),
    ("runAt on a DELAYED job", delayed_body(runAt=RUN_AT), ["runAt"]),
    ("timezone on a ONCE job", once_body(timezone="Europe/Paris"), ["timezone"]),
    ("naive runAt", once_body(runAt="2031-03-14T09:00:00"), ["runAt"]),
    ("runAt not a time", once_body(runAt="next tuesday"), ["runAt"]),
    ("negative delaySec", delayed_body(delaySec=-1), ["delaySec"]),
    ("payload a list", once_body(payload=[1, 2]), ["payload"]),
    ("payload a string", once_body(payload="hello"), ["payload"]),
    ("payload null", once_body(payload=None), ["payload"]),
    ("unknown field", once_body(runat=RUN_AT), ["runat"]),
    ("read-only field given", once_body(state="PAUSED"), ["state"]),
    ("maxAttempts 0", once_body(retryPolicy={"maxAttempts": 0}), ["retryPolicy", "maxAttempts"]),
    (
        "maxDelayMs below initialDelayMs",
        once_body(retryPolicy={"initialDelayMs": 5000, "maxDelayMs": 1000}),
        ["retryPolicy", "maxDelayMs"],
    ),
    ("unknown backoff", once_body(retryPolicy={"backoff": "LINEAR"}), ["retryPolicy", "backoff"]),
    ("unknown retryPolicy field", once_body(retryPolicy={"retries": 3}), ["retryPolicy", "retries"]),
    ("retryPolicy not an object", once_body(retryPolicy=3), ["retryPolicy"]),
    ("unknown priority", once_body(priority="URGENT"), ["priority"]),
    ("numeric priority", once_body(priority=0), ["priority"]),
    ("unknown misfirePolicy", cron_body(misfirePolicy="SOMETIMES"), ["misfirePolicy"]),
    ("unknown concurrencyPolicy", cron_body(concurrencyPolicy="QUEUE"), ["concurrencyPolicy"]),
    ("timeoutSec 0", once_body(timeoutSec=0), ["timeoutSec"]),
    ("unknown type", once_body(type="WEEKLY"), ["type"]),
    ("missing type", {k: v for k, v in once_body().items() if k != "type"}, ["type"]),
    ("missing name", {k: v for k, v in once_body().items() if k != "name"}, ["name"]),
    ("blank name", once_body(name=""), ["name"]),
    ("overlong name", once_body(name="n" * 201), ["name"]),
    ("missing target", {k: v for k, v in once_body().items() if k != "target"}, ["target"]),
]


@pytest.mark.parametrize(("body", "path"), [case[1:] for case in BAD_BODIES], ids=[case[0] for case in BAD_BODIES])
def test_bad_input_is_400_naming_the_field_and_creates_nothing(api, body, path):
    """Each kind of bad input answers 400 with a JSON body whose keys lead to the offending field,
    with a message saying why; no job and no execution are left behind."""
    response = api.post("/v1/jobs", body, format="json")

    assert response.status_code == 400, response.content
    errors = response.json()
    for key in path:
        assert key in errors, (path, errors)
        errors = errors[key]
    assert errors and all(isinstance(message, str) and message for message in errors)
    assert counts() == (0, 0)


def test_payload_one_byte_over_the_limit_is_400_naming_payload(api):
    """A payload whose compact JSON is TICKWORK_MAX_PAYLOAD_BYTES + 1 bytes is refused, though the
    body as a whole is within the parser's allowance; one of exactly the limit is accepted."""
    limit = settings.TICKWORK_MAX_PAYLOAD_BYTES
    envelope = len(json.dumps({"blob": ""}, separators=(",", ":")))

    over = api.post("/v1/jobs", once_body(payload={"blob": "x" * (limit - envelope + 1)}), format="json")

    assert over.status_code == 400
    assert "limit" in over.json()["payload"][0]
    assert counts() == (0, 0)
    at_limit = api.post("/v1/jobs", once_body(payload={"blob": "x" * (limit - envelope)}), format="json")
    assert at_limit.status_code == 201


def test_a_huge_body_is_refused_before_parsing_with_400_naming_payload(api):
    """A multi-megabyte body answers 400 naming `payload`, without being parsed."""
    body = json.dumps(once_body(payload={"blob": "x" * (4 * 1024 * 1024)}))

    response = api.post("/v1/jobs", body, content_type="application/json")

    assert response.status_code == 400
    assert "payload" in response.json()
    assert counts() == (0, 0)


def test_a_body_without_content_length_is_read_only_up_to_the_limit():
    """A streamed body (no Content-Length) is cut off at the limit rather than read whole."""
    import io

    from rest_framework.exceptions import ParseError

    from web.rest import LimitedJSONParser

    stream = io.BytesIO(b'{"payload": "' + b"x" * (8 * 1024 * 1024) + b'"}')

    with pytest.raises(ParseError) as refused:
        LimitedJSONParser().parse(stream, "application/json", {})

    assert "payload" in refused.value.detail
    assert stream.tell() <= settings.TICKWORK_MAX_PAYLOAD_BYTES + 16 * 1024 + 1


def test_malformed_json_is_400_with_a_json_body(api):
    """A body that is not JSON answers 400 with a JSON error saying so."""
    response = api.post("/v1/jobs", '{"name": "x", "type": ', content_type="application/json")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "JSON" in response.json()["detail"]
    assert counts() == (0, 0)


def test_a_json_body_that_is_not_an_object_is_400(api):
    """The body of a create is a JSON object; an array answers 400."""
    response = api.post("/v1/jobs", "[1, 2]", content_type="application/json")

    assert response.status_code == 400
    assert response.json()
    assert counts() == (0, 0)


def test_a_body_that_is_not_json_at_all_is_415(api):
    """Only JSON is accepted; a form-encoded body is an unsupported media type."""
    response = api.post("/v1/jobs", "name=x&type=ONCE", content_type="application/x-www-form-urlencoded")

    assert response.status_code == 415
    assert counts() == (0, 0)


# --- GET /v1/jobs -----------------------------------------------------------------------------------


def test_list_is_paginated_newest_first(api, tenant, make_job):
    """The list answers {"results", "next", ...}, newest job first."""
    older = make_job(tenant, name="older")
    newer = make_job(tenant, name="newer")

    data = api.get("/v1/jobs").json()

    assert {"results", "next"} <= data.keys()
    assert data["next"] is None
    assert [job["jobId"] for job in data["results"]] == [str(newer.pk), str(older.pk)]
    assert JOB_FIELDS <= data["results"][0].keys()


def test_list_cursor_pagination_follows_next_to_every_job_exactly_once(api, tenant, make_job):
    """With pageSize=2, `next` leads page by page through all five jobs, and is null on the last."""
    made = [str(make_job(tenant, name=f"job {i}").pk) for i in range(5)]

    seen, url, pages = [], "/v1/jobs?pageSize=2", 0
    while url:
        data = api.get(url).json()
        assert len(data["results"]) <= 2
        seen += [job["jobId"] for job in data["results"]]
        url, pages = data["next"], pages + 1

    assert pages == 3
    assert seen == list(reversed(made))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=PAUSED", {"paused"}),
        ("state=ACTIVE&state=PAUSED", {"once", "paused", "cron", "batch", "sleepy"}),
        ("type=CRON", {"cron"}),
        ("type=ONCE&type=CRON", {"once", "paused", "cron", "batch", "sleepy"}),
        ("pool=batch", {"batch"}),
        ("handler=sleep", {"sleepy"}),
        ("name=SLEEP", {"sleepy"}),
        ("name=a", {"paused", "batch"}),
        ("type=CRON&name=batch", set()),
    ],
)
def test_list_filters(api, tenant, make_job, query, expected):
    """`state` and `type` take one or more values, `pool` and `handler` match exactly, `name` is a
    case-insensitive substring; filters combine."""
    from scheduling.job_changes import job_cancel, job_pause

    make_job(tenant, name="once")
    job_pause(job=make_job(tenant, name="paused"), now=timezone.now())
    make_job(tenant, name="cron", type="CRON")
    make_job(tenant, name="batch", pool="batch")
    make_job(tenant, name="sleepy", handler="sleep")
    job_cancel(job=make_job(tenant, name="gone", type="DELAYED"), now=timezone.now())

    response = api.get(f"/v1/jobs?{query}")

    assert response.status_code == 200
    assert {job["name"] for job in response.json()["results"]} == expected


def test_list_filter_with_an_unknown_state_is_400(api):
    """An unknown filter value is an error, not an empty list."""
    response = api.get("/v1/jobs?state=SLEEPING")

    assert response.status_code == 400
    assert "state" in response.json()


# --- GET /v1/jobs/{id} ------------------------------------------------------------------------------


def test_detail_includes_latest_executions_newest_first(api, tenant, make_job):
    """The detail is the job plus `latestExecutions`, the newest first."""
    from scheduling.job_changes import job_trigger

    job = make_job(tenant, type="CRON", schedule="0 0 1 1 *")
    triggered = job_trigger(job=job, now=timezone.now())

    response = api.get(f"/v1/jobs/{job.pk}")

    assert response.status_code == 200
    data = response.json()
    assert JOB_FIELDS <= data.keys()
    assert data["jobId"] == str(job.pk)
    executions = data["latestExecutions"]
    assert len(executions) == 2
    scheduled = [parse(e["scheduledFor"]) for e in executions]
    assert scheduled == sorted(scheduled, reverse=True)
    assert str(triggered.pk) in {e["executionId"] for e in executions}
    assert {"executionId", "jobId", "attempt", "state", "scheduledFor", "availableAt"} <= executions[0].keys()


@pytest.mark.parametrize("job_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_detail_of_an_unknown_or_malformed_id_is_404(api, job_id):
    """An id that names no job, well-formed or not, is 404."""
    assert api.get(f"/v1/jobs/{job_id}").status_code == 404


# --- PUT / PATCH /v1/jobs/{id} ----------------------------------------------------------------------


def test_patch_schedule_re_times_the_pending_execution_and_next_fire_at(api, tenant, make_job):
    """Changing a CRON schedule moves its pending fire and nextFireAt to the new schedule's next fire."""
    job = make_job(tenant, type="CRON", schedule="0 0 1 1 *")
    before = timezone.now()

    response = api.patch(f"/v1/jobs/{job.pk}", {"schedule": "30 2 * * *", "timezone": "Asia/Tokyo"}, format="json")

    assert response.status_code == 200, response.content
    data = response.json()
    assert data["schedule"] == "30 2 * * *"
    fire = parse(data["nextFireAt"])
    assert fire == cron.next_fire("30 2 * * *", "Asia/Tokyo", before)
    execution = job.executions.get()
    assert execution.state == "PENDING"
    assert execution.scheduled_for == execution.available_at == fire


def test_patch_run_at_re_times_a_once_job(api, tenant, make_job):
    """Changing runAt moves the pending execution with it."""
    job = make_job(tenant)

    data = api.patch(f"/v1/jobs/{job.pk}", {"runAt": "2032-01-01T00:00:00+09:00"}, format="json").json()

    assert data["runAt"] == data["nextFireAt"] == "2031-12-31T15:00:00Z"
    assert job.executions.get().available_at == datetime(2031, 12, 31, 15, tzinfo=UTC)


def test_patch_delay_sec_counts_from_the_update(api, tenant, make_job):
    """A new delaySec is counted from the time of the change."""
    job = make_job(tenant, type="DELAYED", delay_sec=3600)
    before = timezone.now()

    data = api.patch(f"/v1/jobs/{job.pk}", {"delaySec": 60}, format="json").json()

    due = parse(data["nextFireAt"])
    assert before + timedelta(seconds=60) <= due <= timezone.now() + timedelta(seconds=60)
    assert job.executions.get().available_at == due


def test_patch_of_payload_and_name_leaves_the_timing_alone(api, tenant, make_job):
    """A change that is not about timing does not move the pending execution."""
    job = make_job(tenant)
    due = job.executions.get().available_at

    data = api.patch(f"/v1/jobs/{job.pk}", {"name": "renamed", "payload": {"v": 2}}, format="json").json()

    assert (data["name"], data["payload"]) == ("renamed", {"v": 2})
    assert parse(data["nextFireAt"]) == due
    assert job.executions.get().available_at == due


def test_put_changes_what_it_names(api, tenant, make_job):
    """PUT updates the fields it is given, like PATCH (a job's type and tenant cannot change)."""
    job = make_job(tenant, type="CRON")

    response = api.put(
        f"/v1/jobs/{job.pk}",
        cron_body(name="replaced", schedule="15 * * * *", payload={"p": 1}, priority="LOW"),
        format="json",
    )

    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["name"], data["schedule"], data["payload"], data["priority"]) == (
        "replaced",
        "15 * * * *",
        {"p": 1},
        "LOW",
    )
    assert parse(data["nextFireAt"]).minute == 15
    assert job.executions.get().priority == 2


def test_patch_of_part_of_the_retry_policy_keeps_the_rest(api, tenant, make_job):
    """PATCH {"retryPolicy": {"maxAttempts": 7}} changes only maxAttempts."""
    job = make_job(tenant, backoff="FIXED", initial_delay_ms=500, max_delay_ms=500, jitter=False)

    response = api.patch(f"/v1/jobs/{job.pk}", {"retryPolicy": {"maxAttempts": 7}}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["retryPolicy"] == {
        "maxAttempts": 7,
        "backoff": "FIXED",
        "initialDelayMs": 500,
        "maxDelayMs": 500,
        "jitter": False,
    }


def test_patch_of_a_retry_policy_checks_the_merged_bounds(api, tenant, make_job):
    """A partial policy whose initialDelayMs would exceed the job's maxDelayMs is 400."""
    job = make_job(tenant, max_delay_ms=2000)

    response = api.patch(f"/v1/jobs/{job.pk}", {"retryPolicy": {"initialDelayMs": 5000}}, format="json")

    assert response.status_code == 400
    assert "maxDelayMs" in response.json()["retryPolicy"]
    job.refresh_from_db()
    assert job.initial_delay_ms == 1000


def test_patch_of_the_target_pool_moves_pending_executions(api, tenant, make_job, settings):
    """A target given in part keeps the job's handler; pending executions follow a new pool."""
    settings.TICKWORK_POOLS = ["default", "batch"]
    job = make_job(tenant, handler="sleep")

    data = api.patch(f"/v1/jobs/{job.pk}", {"target": {"pool": "batch"}}, format="json").json()

    assert data["target"] == {"pool": "batch", "handler": "sleep"}
    assert job.executions.get().pool == "batch"


def test_patch_changing_the_type_is_400_and_changes_nothing(api, tenant, make_job):
    """A job's type is fixed at creation."""
    job = make_job(tenant)

    response = api.patch(f"/v1/jobs/{job.pk}", {"type": "CRON", "schedule": "0 * * * *"}, format="json")

    assert response.status_code == 400
    assert "type" in response.json()
    job.refresh_from_db()
    assert (job.type, job.schedule) == ("ONCE", "")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"schedule": ""}, "schedule"),
        ({"timezone": "Nowhere/Special"}, "timezone"),
        ({"runAt": RUN_AT}, "runAt"),
        ({"payload": [1]}, "payload"),
        ({"target": {"handler": "missing"}}, "target"),
        ({"priority": "URGENT"}, "priority"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_patch_with_bad_input_is_400_and_changes_nothing(api, tenant, make_job, changes, field):
    """An invalid update names the field and leaves the job and its pending execution as they were."""
    job = make_job(tenant, type="CRON", schedule="0 0 1 1 *")
    due = job.executions.get().available_at

    response = api.patch(f"/v1/jobs/{job.pk}", changes, format="json")

    assert response.status_code == 400
    assert field in response.json()
    job.refresh_from_db()
    assert (job.schedule, job.timezone, job.payload) == ("0 0 1 1 *", "UTC", {})
    assert job.executions.get().available_at == due


def test_patch_of_a_cancelled_cron_job_is_409(api, tenant, make_job):
    """A cancelled schedule cannot be edited back to life."""
    job = make_job(tenant, type="CRON")
    api.delete(f"/v1/jobs/{job.pk}")

    response = api.patch(f"/v1/jobs/{job.pk}", {"schedule": "5 * * * *"}, format="json")

    assert response.status_code == 409
    job.refresh_from_db()
    assert job.schedule == "0 * * * *"


def test_patch_of_a_cancelled_once_job_does_not_schedule_a_phantom_fire(api, tenant, make_job):
    """After DELETE, a ONCE job has no future fire: a PATCH of runAt must not give it a nextFireAt
    that nothing will run (409, or 200 with nextFireAt still null)."""
    job = make_job(tenant)
    api.delete(f"/v1/jobs/{job.pk}")

    response = api.patch(f"/v1/jobs/{job.pk}", {"runAt": "2032-01-01T00:00:00Z"}, format="json")

    assert response.status_code == 409 or response.json()["nextFireAt"] is None


def test_a_completed_one_off_job_neither_pauses_cancels_nor_changes(api, tenant, make_job, drive):
    """COMPLETED is read from its run (executions/standing.py), not stored: a pause, a DELETE and a
    PATCH of it answer 409 naming COMPLETED all the same, and the list finds it by that state."""
    job = make_job(tenant)
    drive(job.executions.get(), "SUCCEEDED")

    for response in (
        api.post(f"/v1/jobs/{job.pk}/pause"),
        api.delete(f"/v1/jobs/{job.pk}"),
        api.patch(f"/v1/jobs/{job.pk}", {"runAt": "2032-01-01T00:00:00Z"}, format="json"),
    ):
        assert response.status_code == 409
        assert "COMPLETED" in response.json()["detail"]
    shown = api.get(f"/v1/jobs/{job.pk}").json()
    assert (shown["state"], shown["nextFireAt"]) == ("COMPLETED", None)
    assert [j["jobId"] for j in api.get("/v1/jobs", {"state": "COMPLETED"}).json()["results"]] == [str(job.pk)]
    assert api.get("/v1/jobs", {"state": "ACTIVE"}).json()["results"] == []


# --- DELETE /v1/jobs/{id} ---------------------------------------------------------------------------


def test_delete_cancels_the_job_and_its_pending_execution(api, tenant, make_job):
    """DELETE answers 200 with the CANCELLED job, no nextFireAt, and its pending execution CANCELLED."""
    job = make_job(tenant, type="CRON")

    response = api.delete(f"/v1/jobs/{job.pk}")

    assert response.status_code == 200
    data = response.json()
    assert data["state"] == "CANCELLED"
    assert data["nextFireAt"] is None
    execution = job.executions.get()
    assert execution.state == "CANCELLED"
    assert execution.finished_at is not None
    assert execution.events.last().to_state == "CANCELLED"


def test_delete_of_a_cancelled_job_is_409(api, tenant, make_job):
    """A job is cancelled once; cancelling again is a forbidden transition."""
    job = make_job(tenant)
    api.delete(f"/v1/jobs/{job.pk}")

    assert api.delete(f"/v1/jobs/{job.pk}").status_code == 409


# --- pause / resume / trigger -----------------------------------------------------------------------


def test_pause_then_resume(api, tenant, make_job):
    """pause: ACTIVE → PAUSED; resume: PAUSED → ACTIVE; each answers 200 with the job."""
    job = make_job(tenant, type="CRON")

    paused = api.post(f"/v1/jobs/{job.pk}/pause")
    assert paused.status_code == 200
    assert paused.json()["state"] == "PAUSED"
    assert job.executions.get().state == "PENDING"  # it waits; the claim skips paused jobs

    resumed = api.post(f"/v1/jobs/{job.pk}/resume")
    assert resumed.status_code == 200
    assert resumed.json()["state"] == "ACTIVE"


@pytest.mark.parametrize(
    ("setup", "action"),
    [
        ([], "resume"),  # resume an ACTIVE job
        (["pause"], "pause"),  # pause a PAUSED job
        (["cancel"], "pause"),
        (["cancel"], "resume"),
        (["cancel"], "trigger"),
        (["pause"], "trigger"),
    ],
    ids=["resume-active", "pause-paused", "pause-cancelled", "resume-cancelled", "trigger-cancelled", "trigger-paused"],
)
def test_forbidden_job_transitions_are_409_and_change_nothing(api, tenant, make_job, setup, action):
    """A move the job state machine forbids answers 409 with a reason; the job stays as it was."""
    job = make_job(tenant, type="CRON")
    for step in setup:
        if step == "cancel":
            api.delete(f"/v1/jobs/{job.pk}")
        else:
            api.post(f"/v1/jobs/{job.pk}/{step}")
    job.refresh_from_db()
    state, executions = job.state, job.executions.count()

    response = api.post(f"/v1/jobs/{job.pk}/{action}")

    assert response.status_code == 409
    assert response.json()["detail"]
    job.refresh_from_db()
    assert job.state == state
    assert job.executions.count() == executions


def test_trigger_makes_an_execution_due_now(api, tenant, make_job):
    """trigger answers 200 with a new PENDING execution due now, outside the schedule."""
    job = make_job(tenant, type="CRON", schedule="0 0 1 1 *")
    before = timezone.now()

    response = api.post(f"/v1/jobs/{job.pk}/trigger")

    assert response.status_code == 200
    data = response.json()
    assert data["jobId"] == str(job.pk)
    assert data["state"] == "PENDING"
    assert data["origin"] == "TRIGGER"
    assert within_db_clock(before, parse(data["availableAt"]), timezone.now())
    assert job.executions.count() == 2


def test_trigger_runs_a_completed_one_off_job_again(api, tenant, make_job, drive):
    """A COMPLETED one-off job can be run again: it becomes ACTIVE with a new execution."""
    job = make_job(tenant)
    drive(job.executions.get(), "SUCCEEDED")
    job.refresh_from_db()
    assert job.standing == "COMPLETED"

    response = api.post(f"/v1/jobs/{job.pk}/trigger")

    assert response.status_code == 200
    job.refresh_from_db()
    assert job.standing == "ACTIVE"
    assert job.executions.filter(state="PENDING").count() == 1


# --- GET /v1/jobs/{id}/executions -------------------------------------------------------------------


def test_job_executions_are_its_own_newest_first_and_paginated(api, tenant, make_job):
    """The history lists only this job's executions, newest scheduled first, page by page."""
    from scheduling.job_changes import job_trigger

    job = make_job(tenant, type="CRON", schedule="0 0 1 1 *")
    start = timezone.now()
    for minutes in (3, 1, 2):
        job_trigger(job=job, now=start - timedelta(minutes=minutes))
    make_job(tenant)  # another job's execution is not listed

    first = api.get(f"/v1/jobs/{job.pk}/executions?pageSize=3")
    assert first.status_code == 200
    page = first.json()
    assert page["next"]
    rest = api.get(page["next"]).json()
    assert rest["next"] is None

    listed = page["results"] + rest["results"]
    assert len(listed) == 4
    assert {e["jobId"] for e in listed} == {str(job.pk)}
    scheduled = [parse(e["scheduledFor"]) for e in listed]
    assert scheduled == sorted(scheduled, reverse=True)


def test_job_executions_of_an_unknown_job_is_404(api):
    """The history of a job that does not exist is 404, not an empty list."""
    assert api.get("/v1/jobs/00000000-0000-0000-0000-000000000000/executions").status_code == 404
