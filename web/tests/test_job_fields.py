"""The job's table of fields (jobs/fields.py) and the API's names for them (web/api/job_api_names.py)
drive every place that writes a job's fields: a field of the table that one of them does not name
fails here. With jobs/tests/test_fields.py (every model field is in the table or internal), this is
the recipe of docs/architecture.md, "A job's field", held true."""

from datetime import UTC, datetime

import pytest

from dashboard.jobs import forms
from jobs.fields import FIELDS, GROUPS, definition_of
from jobs.models import Job
from web.api import job_contract
from web.api.job_api_names import API_NAME, MODEL_NAME, STEP_API_NAME, api_changes, api_definition, api_workflow
from web.api.job_fields import GROUP_INPUT, GROUP_OUTPUT
from web.api.job_serializers import JobInputSerializer, JobOutputSerializer
from web.api.job_versions import VersionDefinitionSerializer
from web.api.workflow_serializers import WorkflowSerializer

TOP = [API_NAME[name] for name in dict.fromkeys(field.group or field.name for field in FIELDS)]


def _nested(serializer, name):
    """The fields of a group's object in `serializer` (a nested serializer, or what a field's
    schema names)."""
    field = serializer.fields[name]
    if hasattr(field, "fields"):
        return set(field.fields)
    return set(field._spectacular_annotation["field"].fields)


def test_every_field_and_group_has_an_api_name_and_back():
    assert set(API_NAME) == {field.name for field in FIELDS} | set(GROUPS)
    assert len(MODEL_NAME) == len(API_NAME), "two fields of one API name"
    assert API_NAME["event_name"] == "on" and API_NAME["retry_policy"] == "retryPolicy"


@pytest.mark.parametrize("serializer", [JobInputSerializer(), JobOutputSerializer(), VersionDefinitionSerializer()])
def test_the_serializers_name_every_field_of_the_table(serializer):
    assert set(TOP) <= set(serializer.fields), (
        f"{type(serializer).__name__} does not name {set(TOP) - set(serializer.fields)}"
    )
    for group, fields in GROUPS.items():
        assert _nested(serializer, API_NAME[group]) == {API_NAME[field.name] for field in fields}


@pytest.mark.parametrize(
    ("side", "table", "group_table"),
    [("input", job_contract.INPUT, GROUP_INPUT), ("output", job_contract.OUTPUT, GROUP_OUTPUT)],
)
def test_every_field_and_group_of_the_table_declares_its_serializer_field(side, table, group_table):
    """A field added to jobs/fields.py fails here until web/api/job_contract.py (or, for a
    group's, web/api/job_fields.py) says how a request gives it and an answer writes it."""
    declared = [*table, *group_table]
    assert len(declared) == len(set(declared)), f"a field declared twice in the {side}"
    missing = ({field.name for field in FIELDS} | set(GROUPS)) - set(declared)
    assert not missing, f"no {side} serializer field for {sorted(missing)}"


def test_an_answer_reads_each_field_from_its_model_attribute():
    fields = JobOutputSerializer().fields
    for field in FIELDS:
        if not field.group:
            assert fields[API_NAME[field.name]].source == field.name
    for group in GROUPS:
        assert fields[API_NAME[group]].source == "*"
    policy = fields["retryPolicy"].fields
    assert all(policy[API_NAME[field.name]].source == field.name for field in GROUPS["retry_policy"])


def test_the_validated_api_body_of_a_definition_gives_back_the_jobs_fields():
    """What a version's restore and a PUT do: the API's body of a definition, in the model's terms."""
    job = Job(
        type="INTERVAL",
        name="n",
        every_sec=60,
        start_at=datetime(2031, 1, 1, tzinfo=UTC),
        pool="p",
        handler="noop",
        payload={"a": 1},
        max_attempts=4,
        priority=0,
    )
    body = api_definition(definition_of(job))
    body["startAt"] = job.start_at  # validated: a time, not its text

    fields = JobInputSerializer.model_fields_of(body)

    held = {field.name for field in FIELDS if field.held is None or field.held(job)}
    assert set(fields) == held
    assert all(fields[name] == getattr(job, name) for name in held)


def test_a_versions_changes_are_shown_in_the_apis_names():
    assert api_changes([{"field": "retry_policy.max_attempts", "from": 1, "to": 2}]) == [
        {"field": "retryPolicy.maxAttempts", "from": 1, "to": 2}
    ]


def test_the_dashboards_form_has_every_field_of_a_plain_job():
    on_form = {API_NAME[field.name] for field in FIELDS if field.name not in forms.NOT_ON_FORM}
    assert set(forms.FORM_FIELDS) == on_form | {"tenant"}
    assert set(forms.initial_values(tenant_slug="t")) == set(forms.FORM_FIELDS)


def test_the_api_names_what_a_workflow_step_may_set_of_its_own():
    """A step keeps what it sets as the job's field it overrides (jobs/workflow.py); the API shows
    each under the job's API name."""
    step_fields = {field.name for field in FIELDS if field.step}
    groups = {field.group for field in FIELDS if field.step and field.group}
    assert step_fields | groups <= set(STEP_API_NAME)
    assert all(STEP_API_NAME[name] == API_NAME[name] for name in step_fields | groups)


def test_a_workflow_is_kept_in_the_models_names_and_shown_in_the_apis():
    given = {
        "steps": [
            {"name": "a", "target": {"pool": "p", "handler": "noop"}, "payload": {"maxAttempts": 1}, "dependsOn": []},
            {
                "name": "b",
                "target": {"pool": "p", "handler": "noop"},
                "payload": {},
                "dependsOn": ["a"],
                "retryPolicy": {"maxAttempts": 2, "initialDelayMs": 5},
                "timeoutSec": 9,
            },
        ]
    }

    kept = WorkflowSerializer.stored(given)

    assert kept["steps"][1] == {
        "name": "b",
        "target": {"pool": "p", "handler": "noop"},
        "payload": {},
        "depends_on": ["a"],
        "retry_policy": {"max_attempts": 2, "initial_delay_ms": 5},
        "timeout_sec": 9,
    }
    assert kept["steps"][0]["payload"] == {"maxAttempts": 1}, "a payload is the handler's document"
    assert api_workflow(kept) == given
    assert list(api_workflow(kept)["steps"][1]) == list(given["steps"][1])
