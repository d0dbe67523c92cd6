"""GET /v1/executions/{id}/logs: an execution's lines, per attempt, in order, paged by position."""

from datetime import UTC, datetime, timedelta

import pytest

from executions import logs
from worker.log_capture import AttemptLog

pytestmark = pytest.mark.django_db

T0 = datetime(2027, 3, 14, 9, 0, tzinfo=UTC)


def _write(execution, attempt: int, messages: list[str], *, level: str = "INFO") -> None:
    lines = [
        logs.Line(seq=seq, at=T0 + timedelta(seconds=seq), level=level, logger="billing.invoices", message=message)
        for seq, message in enumerate(messages, start=1)
    ]
    logs.log_lines_write(execution_id=execution.pk, attempt=attempt, lines=lines)


@pytest.fixture
def execution(tenant, make_job):
    execution = make_job(tenant).executions.get()
    _write(execution, 2, ["second try", "worked"])
    _write(execution, 1, ["first try", "it failed"], level="ERROR")
    return execution


def test_the_lines_of_every_attempt_in_order(api, execution):
    """Attempt 1's lines, then attempt 2's, each in seq order, with every field; nothing dropped."""
    response = api.get(f"/v1/executions/{execution.pk}/logs")

    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    assert body["dropped"] == []
    assert [(line["attempt"], line["seq"], line["message"]) for line in body["results"]] == [
        (1, 1, "first try"),
        (1, 2, "it failed"),
        (2, 1, "second try"),
        (2, 2, "worked"),
    ]
    assert body["results"][0] == {
        "attempt": 1,
        "seq": 1,
        "time": "2027-03-14T09:00:01Z",
        "level": "ERROR",
        "logger": "billing.invoices",
        "message": "first try",
    }


def test_attempt_filters_to_that_attempts_lines(api, execution):
    body = api.get(f"/v1/executions/{execution.pk}/logs?attempt=2").json()

    assert [(line["attempt"], line["message"]) for line in body["results"]] == [(2, "second try"), (2, "worked")]
    assert api.get(f"/v1/executions/{execution.pk}/logs?attempt=3").json()["results"] == []


def test_pages_follow_next_and_after_tails_from_a_line(api, execution):
    """pageSize=3: the first page ends at attempt 2's first line and `next` continues after it;
    after=1.1 (a tail) gives what came after attempt 1's first line."""
    first = api.get(f"/v1/executions/{execution.pk}/logs?pageSize=3").json()
    assert [(line["attempt"], line["seq"]) for line in first["results"]] == [(1, 1), (1, 2), (2, 1)]
    assert "after=2.1" in first["next"]
    second = api.get(first["next"]).json()
    assert [(line["attempt"], line["seq"]) for line in second["results"]] == [(2, 2)]
    assert second["next"] is None

    tail = api.get(f"/v1/executions/{execution.pk}/logs?attempt=1&after=1.1").json()
    assert [line["message"] for line in tail["results"]] == ["it failed"]


def test_another_tenants_execution_is_not_found(other_api, execution):
    assert other_api.get(f"/v1/executions/{execution.pk}/logs").status_code == 404
    assert other_api.get("/v1/executions/not-a-uuid/logs").status_code == 404


@pytest.mark.parametrize(
    "query, field",
    [("attempt=0", "attempt"), ("attempt=x", "attempt"), ("after=3", "after"), ("pageSize=1001", "pageSize")],
)
def test_a_bad_query_is_a_400_naming_the_parameter(api, execution, query, field):
    response = api.get(f"/v1/executions/{execution.pk}/logs?{query}")

    assert response.status_code == 400
    assert field in response.json()


def test_an_attempt_past_its_bound_says_how_many_lines_were_dropped(api, tenant, make_job):
    """Five lines kept of twelve (TICKWORK_LOG_LINES_PER_ATTEMPT = 5, through the worker's
    capture): the sixth line says 7 were dropped, and so does `dropped`."""
    execution = make_job(tenant).executions.get()
    capture = AttemptLog(execution_id=str(execution.pk), attempt=1, name="h", limit=5, line_bytes=1000)
    for n in range(12):
        capture.add("INFO", None, f"line {n}")
    capture.flush()

    body = api.get(f"/v1/executions/{execution.pk}/logs").json()

    assert [line["seq"] for line in body["results"]] == [1, 2, 3, 4, 5, 6]
    assert body["results"][5]["logger"] == "tickwork"
    assert body["results"][5]["message"].startswith("7 more lines not kept")
    assert body["dropped"] == [{"attempt": 1, "lines": 7}]
    assert api.get(f"/v1/executions/{execution.pk}/logs?attempt=2").json()["dropped"] == []


@pytest.mark.parametrize("query", ["pageSize=", "attempt=", "after="])
def test_a_query_parameter_given_empty_is_400_not_left_out(api, tenant, make_job, query):
    """Schemathesis found `?pageSize=` taken as absent: the schema says an integer."""
    execution = make_job(tenant).executions.get()

    response = api.get(f"/v1/executions/{execution.pk}/logs?{query}")

    assert response.status_code == 400
    assert query.rstrip("=") in response.json()
