"""jobs/fields.py: the table of a job's fields holds every field of the model, or says it is not
part of what the job was asked to do; its definition is the fields the job's type and kind hold."""

from datetime import UTC, datetime

from jobs.fields import BY_NAME, FIELDS, GROUPS, INTERNAL, definition_of, group_of
from jobs.models import Job


def test_every_field_of_the_job_is_in_the_table_or_internal():
    model_fields = {field.name for field in Job._meta.concrete_fields}
    table = {field.name for field in FIELDS}

    assert table.isdisjoint(INTERNAL)
    assert model_fields == table | INTERNAL, (
        "a job's field that jobs/fields.py does not name: add it to FIELDS (docs/architecture.md, "
        "'An API field') or, if it is not what the job was asked to do, to INTERNAL"
    )


def test_a_group_holds_its_fields_in_the_tables_order():
    assert [field.name for field in GROUPS["target"]] == ["pool", "handler", "rate_limit"]
    assert list(group_of(Job(max_attempts=5), "retry_policy")) == [
        "max_attempts",
        "backoff",
        "initial_delay_ms",
        "max_delay_ms",
        "jitter",
    ]
    assert {name for name, field in BY_NAME.items() if field.step} == {*group_of(Job(), "retry_policy"), "timeout_sec"}


def test_the_definition_holds_what_the_type_and_kind_hold_in_the_models_names():
    interval = Job(type="INTERVAL", name="i", every_sec=60, start_at=datetime(2031, 1, 1, tzinfo=UTC), pool="p")
    interval.handler, interval.priority = "noop", 1
    workflow_event = Job(type="EVENT", name="e", event_name="paid", workflow={"steps": []}, priority=1)

    assert list(definition_of(interval)) == [
        "name",
        "type",
        "every_sec",
        "start_at",
        "target",
        "payload",
        "retry_policy",
        "timeout_sec",
        "priority",
        "misfire_policy",
        "concurrency_policy",
    ]
    interval.pause_after_failures = 3
    assert definition_of(interval)["pause_after_failures"] == 3  # held when set, as a CRON job's start_at
    interval.pause_after_failures = None
    assert definition_of(interval)["start_at"] == "2031-01-01T00:00:00Z"
    assert definition_of(interval)["target"] == {"pool": "p", "handler": "noop"}
    assert definition_of(interval)["priority"] == "NORMAL"
    assert list(definition_of(workflow_event))[:5] == ["name", "type", "workflow", "event_name", "event_filter"]
    assert "target" not in definition_of(workflow_event) and "payload" not in definition_of(workflow_event)
