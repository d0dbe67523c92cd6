"""The API's service endpoints: /v1/schedule/preview (with DST), /v1/health, /v1/schema, /v1/docs."""

import itertools
import json
from datetime import datetime, timedelta

import pytest
import yaml
from django.utils import timezone

pytestmark = pytest.mark.django_db


def preview(client, **params):
    return client.get("/v1/schedule/preview", params)


def fire_pairs(response) -> list[tuple[str, str]]:
    return [(fire["utc"], fire["local"]) for fire in response.json()["fireTimes"]]


# --- GET /v1/schedule/preview -----------------------------------------------------------------------


def test_preview_answers_the_contract_shape(api):
    """{"schedule", "timezone", "fireTimes": [{"utc": "...Z", "local": "...+hh:mm"}]}, `count` fires
    strictly after `after`."""
    response = preview(api, schedule="0 9 * * 1-5", timezone="Europe/Paris", count=3, after="2027-01-01T08:00:00Z")

    assert response.status_code == 200
    assert response.json() == {
        "schedule": "0 9 * * 1-5",
        "timezone": "Europe/Paris",
        "fireTimes": [
            # 2027-01-01 09:00 local is `after` itself, so not after it; the 2nd and 3rd are a weekend.
            {"utc": "2027-01-04T08:00:00Z", "local": "2027-01-04T09:00:00+01:00"},
            {"utc": "2027-01-05T08:00:00Z", "local": "2027-01-05T09:00:00+01:00"},
            {"utc": "2027-01-06T08:00:00Z", "local": "2027-01-06T09:00:00+01:00"},
        ],
    }


def test_preview_defaults_to_five_fires_in_utc_after_now(api):
    """Without timezone, count and after: UTC, five fires, the first after the current time."""
    before = timezone.now()

    data = preview(api, schedule="*/5 * * * *").json()

    assert data["timezone"] == "UTC"
    fires = [datetime.fromisoformat(fire["utc"]) for fire in data["fireTimes"]]
    assert len(fires) == 5
    assert before < fires[0] <= before + timedelta(minutes=5)
    assert all(b - a == timedelta(minutes=5) for a, b in itertools.pairwise(fires))
    assert all(fire["local"].endswith("+00:00") for fire in data["fireTimes"])


def test_preview_after_with_an_offset_is_the_same_instant(api):
    """`after` is any ISO 8601 time with an offset; +01:00 and the equivalent Z give the same fires."""
    with_offset = preview(api, schedule="0 * * * *", after="2027-06-01T10:30:00+01:00", count=2)
    in_utc = preview(api, schedule="0 * * * *", after="2027-06-01T09:30:00Z", count=2)

    assert fire_pairs(with_offset) == fire_pairs(in_utc)
    assert fire_pairs(in_utc)[0][0] == "2027-06-01T10:00:00Z"


def test_preview_wall_clock_time_skipped_by_spring_forward_fires_at_the_end_of_the_gap(api):
    """`30 2 * * *` in Los Angeles on 2027-03-14 (02:00 → 03:00) fires at 03:00 PDT = 10:00Z,
    and at 02:30 local on the days around it."""
    response = preview(
        api, schedule="30 2 * * *", timezone="America/Los_Angeles", count=3, after="2027-03-13T00:00:00Z"
    )

    assert fire_pairs(response) == [
        ("2027-03-13T10:30:00Z", "2027-03-13T02:30:00-08:00"),
        ("2027-03-14T10:00:00Z", "2027-03-14T03:00:00-07:00"),
        ("2027-03-15T09:30:00Z", "2027-03-15T02:30:00-07:00"),
    ]


def test_preview_wall_clock_time_repeated_by_fall_back_fires_once(api):
    """`30 1 * * *` in London on 2027-10-31 (01:00-02:00 happens twice) fires at the first 01:30 only."""
    response = preview(api, schedule="30 1 * * *", timezone="Europe/London", count=3, after="2027-10-30T00:00:00Z")

    assert fire_pairs(response) == [
        ("2027-10-30T00:30:00Z", "2027-10-30T01:30:00+01:00"),
        ("2027-10-31T00:30:00Z", "2027-10-31T01:30:00+01:00"),
        ("2027-11-01T01:30:00Z", "2027-11-01T01:30:00+00:00"),
    ]


def test_preview_hourly_schedule_fires_25_times_on_the_fall_back_day(api):
    """`0 * * * *` runs by elapsed time: Europe/London's 2027-10-31 has 25 hours, so 25 fires,
    01:00 twice (once at +01:00, once at +00:00)."""
    response = preview(api, schedule="0 * * * *", timezone="Europe/London", count=26, after="2027-10-30T22:30:00Z")

    local = [fire["local"] for fire in response.json()["fireTimes"]]
    on_the_day = [time for time in local if time.startswith("2027-10-31")]
    assert len(on_the_day) == 25
    assert local[-1] == "2027-11-01T00:00:00+00:00"
    assert "2027-10-31T01:00:00+01:00" in on_the_day and "2027-10-31T01:00:00+00:00" in on_the_day


def test_preview_hourly_schedule_fires_23_times_on_the_spring_forward_day(api):
    """Europe/London's 2027-03-28 has 23 hours (01:00 → 02:00): 23 fires, none at 01:xx local."""
    response = preview(api, schedule="0 * * * *", timezone="Europe/London", count=24, after="2027-03-27T23:30:00Z")

    local = [fire["local"] for fire in response.json()["fireTimes"]]
    on_the_day = [time for time in local if time.startswith("2027-03-28")]
    assert len(on_the_day) == 23
    assert not any(time.startswith("2027-03-28T01:") for time in on_the_day)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"schedule": "* * *"}, "schedule"),
        ({"schedule": "0 0 30 2 *"}, "schedule"),
        ({}, "schedule"),
        ({"schedule": "0 * * * *", "timezone": "Atlantis/Capital"}, "timezone"),
        ({"schedule": "0 * * * *", "after": "yesterday"}, "after"),
        ({"schedule": "0 * * * *", "after": "2027-03-14T09:00:00"}, "after"),
        ({"schedule": "0 * * * *", "count": 0}, "count"),
        ({"schedule": "0 * * * *", "count": 101}, "count"),
        ({"schedule": "0 * * * *", "count": "many"}, "count"),
        ({"schedule": "0 * * * *", "count": ""}, "count"),
        ({"schedule": "0 * * * *", "after": ""}, "after"),
    ],
    ids=[
        "minute-61",
        "three-fields",
        "never-fires",
        "no-schedule",
        "unknown-timezone",
        "after-not-a-time",
        "after-naive",
        "count-0",
        "count-101",
        "count-not-a-number",
        "count-empty",
        "after-empty",
    ],
)
def test_preview_bad_input_is_400_naming_the_parameter(api, params, field):
    """Each bad parameter answers 400 with a JSON body naming it and saying why."""
    response = preview(api, **params)

    assert response.status_code == 400
    errors = response.json()
    assert field in errors
    assert errors[field][0]


def test_preview_at_the_end_of_time_is_400_not_500(api):
    """An `after` so late that no fire can follow it is bad input, not a server error."""
    response = preview(api, schedule="0 0 1 1 *", after="9999-12-31T00:00:00Z")

    assert response.status_code == 400


# --- GET /v1/health ---------------------------------------------------------------------------------


@pytest.fixture
def roles_up(db):
    """A dispatcher, a sweeper and a worker that have just reported, as running ones do."""
    from executions.clock import db_now
    from pools.roles import RoleBeat
    from testing.steps import capacity

    beats = [RoleBeat(kind, clock=db_now) for kind in ("dispatcher", "sweeper")]
    for beat in beats:
        beat.started()
    capacity(db_now(), slots=4)
    return beats


def test_health_is_200_when_database_broker_and_roles_answer(client, roles_up):
    """Health needs no token: 200 with database, broker, dispatcher, sweeper and workers "ok",
    and what the registries say of each role."""
    response = client.get("/v1/health")

    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("database", "broker", "dispatcher", "sweeper", "workers", "status")} == {
        "database": "ok",
        "broker": "ok",
        "dispatcher": "ok",
        "sweeper": "ok",
        "workers": "ok",
        "status": "ok",
    }
    [dispatcher] = body["roles"]["dispatcher"]["processes"]
    assert dispatcher["pid"] > 0 and dispatcher["lastError"] is None
    assert body["roles"]["workers"]["live"] == 1 and body["roles"]["workers"]["pools"]["default"]["slots"] == 4


def test_health_is_503_when_no_dispatcher_was_ever_seen(client, db):
    """Without a dispatcher nothing due ever starts: 503 naming it (a sweeper and workers missing
    are said too)."""
    response = client.get("/v1/health")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["dispatcher"].startswith("no dispatcher seen")
    assert body["sweeper"].startswith("no sweeper seen") and body["workers"].startswith("no live worker")


def test_health_is_503_when_the_dispatcher_fails_every_unit_of_work(client, roles_up, settings):
    """A dispatcher that runs but fails every claim is not seen finishing one: past the bound,
    503 with its last error (the embedded dispatcher once failed every second under a 200)."""
    from datetime import timedelta

    from executions.clock import db_now
    from pools.models import Role

    settings.TICKWORK_HEALTH_DISPATCHER_SECONDS = 5
    dispatcher = roles_up[0]
    Role.objects.filter(pk=dispatcher.row_id).update(last_seen_at=db_now() - timedelta(seconds=20))
    dispatcher.failed(TypeError("can't compare offset-naive and offset-aware datetimes"))

    response = client.get("/v1/health")

    assert response.status_code == 503
    assert "no dispatcher has finished a unit of work for 2" in response.json()["dispatcher"]
    assert response.json()["dispatcher"].endswith(
        "its last error: TypeError: can't compare offset-naive and offset-aware datetimes"
    )


def test_health_is_200_but_degraded_without_a_sweeper(client, roles_up):
    from pools.models import Role

    Role.objects.filter(kind="sweeper").update(stopped_at=Role.objects.get(kind="sweeper").last_seen_at)

    response = client.get("/v1/health")

    assert response.status_code == 200
    assert response.json()["status"] == "degraded" and response.json()["sweeper"].startswith("no sweeper seen")


def test_health_says_no_alerter_only_while_an_alert_rule_is_on(client, roles_up):
    """Without an alerter nothing pages: degraded (200) once a rule is on, not before; and "ok"
    again when an alerter reports."""
    from alerts.models import AlertRule
    from executions.clock import db_now
    from pools.roles import RoleBeat

    assert client.get("/v1/health").json()["alerter"] == "ok"

    AlertRule.objects.create(name="dead", kind="DEAD_LETTER", threshold=0, window_sec=300, channels=[])
    body = client.get("/v1/health").json()
    assert body["status"] == "degraded" and body["alerter"].startswith("no alerter seen")

    RoleBeat("alerter", clock=db_now).started()
    body = client.get("/v1/health").json()
    assert body["status"] == "ok" and body["alerter"] == "ok"
    assert body["roles"]["alerter"]["processes"][0]["pid"] > 0


@pytest.fixture
def unreachable_broker(monkeypatch):
    """Points the project's Celery app at a closed port, and back afterwards."""
    from scheduler_project.celery import app

    unreachable = "redis://127.0.0.1:1/0"
    # Celery prefers the environment to its configuration; cover both.
    monkeypatch.setenv("CELERY_BROKER_URL", unreachable)
    monkeypatch.delenv("CELERY_BROKER_WRITE_URL", raising=False)
    saved = {name: app.conf[name] for name in ("broker_url", "broker_transport_options")}
    app.conf.update(broker_url=unreachable, broker_transport_options={})
    yield
    app.conf.update(saved)


def test_health_is_503_naming_the_broker_when_it_cannot_be_reached(client, unreachable_broker, roles_up):
    """With the broker at a closed port, health answers 503 and says the broker is unreachable
    (the database still "ok")."""
    response = client.get("/v1/health")

    assert response.status_code == 503
    data = response.json()
    assert data["status"] == "unavailable"
    assert data["database"] == "ok"
    assert "broker unreachable" in data["broker"]


def test_health_recovers_when_the_broker_is_back(client, unreachable_broker, roles_up):
    """Health is checked on every call: once the broker answers again, it is 200 again."""
    from scheduler_project.celery import app

    assert client.get("/v1/health").status_code == 503
    app.conf.update(broker_url="memory://")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CELERY_BROKER_URL", "memory://")
        assert client.get("/v1/health").status_code == 200


def test_health_is_503_naming_the_database_when_it_fails(client, monkeypatch):
    """A failing database check answers 503 naming the database."""
    import web.api.health

    monkeypatch.setattr(web.api.health, "check_database", lambda: "database unreachable: simulated")

    response = client.get("/v1/health")

    assert response.status_code == 503
    assert response.json()["database"] == "database unreachable: simulated"


# --- /v1/schema and /v1/docs ------------------------------------------------------------------------


def test_schema_is_openapi_3_with_the_contract_paths(client):
    """/v1/schema serves an OpenAPI 3 document (YAML by default) describing every contract path."""
    response = client.get("/v1/schema")

    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in (
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/pause",
        "/v1/jobs/{job_id}/resume",
        "/v1/jobs/{job_id}/trigger",
        "/v1/jobs/{job_id}/executions",
        "/v1/executions",
        "/v1/executions/{execution_id}",
        "/v1/executions/{execution_id}/cancel",
        "/v1/executions/{execution_id}/retry",
        "/v1/schedule/preview",
        "/v1/health",
    ):
        assert path in paths, path
    assert {"get", "post"} <= paths["/v1/jobs"].keys()
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    job = schema["components"]["schemas"]["JobOutput"]["properties"]
    assert {"jobId", "runAt", "delaySec", "retryPolicy", "nextFireAt", "createdAt"} <= job.keys()
    event = schema["components"]["schemas"]["ExecutionEvent"]["properties"]
    assert set(event) == {"time", "from", "to", "attempt", "worker", "message"}
    fire_times = schema["components"]["schemas"]["SchedulePreview"]["properties"]
    assert set(fire_times) == {"schedule", "resolvedSchedule", "everySec", "startAt", "timezone", "fireTimes"}


def test_schema_as_json(client):
    """?format=json serves the same schema as JSON."""
    response = client.get("/v1/schema?format=json")

    assert response.status_code == 200
    assert "/v1/jobs" in json.loads(response.content)["paths"]


def test_docs_is_the_browsable_swagger_ui(client):
    """/v1/docs is an HTML page whose start-up script loads the schema, with assets served
    locally (no CDN)."""
    response = client.get("/v1/docs")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "swagger" in page.lower()
    assert "/v1/schema" in client.get("/v1/docs?script=").content.decode()
    assert "cdn.jsdelivr" not in page
